# Answers to lesson 07's exercise 2 (07.pick_m), written the way learners write them.
# Each cell runs in a fresh process after the notebook's set-up; tests/answers.py says how.

# %% right: math.ceil of the solved inequality, as the published solution
import math

def choose(p, target):
    return max(1, math.ceil((p - 1) * (1 - target) / target))

al.check("07.pick_m", choose)

# %% right: math.ceil of (p-1)/target - (p-1), solved the other way round
import math

def choose(p, target):
    return math.ceil((p - 1) / target - (p - 1))

al.check("07.pick_m", choose)

# %% right: a search loop that adds micro-batches until the bubble is small enough
def choose(p, target):
    m = 1
    while (p - 1) / (m + p - 1) > target:
        m += 1
    return m

al.check("07.pick_m", choose)

# %% right: itertools.count and the first m that fits
import itertools

def choose(p, target):
    for m in itertools.count(1):
        if (p - 1) / (m + p - 1) <= target:
            return m

al.check("07.pick_m", choose)

# %% right: next() over a range, and checked twice
def choose(p, target):
    return next(m for m in range(1, 100_000) if (p - 1) / (m + p - 1) <= target)

al.check("07.pick_m", choose)
al.check("07.pick_m", choose)

# %% right: integer ceiling -(-a // b) on exact fractions of the target's decimals
from fractions import Fraction

def choose(p, target):
    t = Fraction(str(target))
    a = (p - 1) * (t.denominator - t.numerator)   # (p-1)(1-t)/t, numerator and denominator in integers
    b = t.numerator
    return -(-a // b)

al.check("07.pick_m", choose)

# %% right: math.ceil of a Fraction, no rounding anywhere
import math
from fractions import Fraction

def choose(p, target):
    t = Fraction(target)
    return math.ceil((p - 1) * (1 - t) / t)

al.check("07.pick_m", choose)

# %% right: numpy over every candidate m, the first that fits
import numpy as np

def choose(p, target):
    m = np.arange(1, 100_000)
    bubble = (p - 1) / (m + p - 1)
    return int(m[bubble <= target][0])

al.check("07.pick_m", choose)

# %% right: numpy's ceil, turned into an int
import numpy as np

def choose(p, target):
    return int(np.ceil((p - 1) * (1 - target) / target))

al.check("07.pick_m", choose)

# %% right: a binary search on m
def choose(p, target):
    lo, hi = 1, 1
    while (p - 1) / (hi + p - 1) > target:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if (p - 1) / (mid + p - 1) <= target:
            hi = mid
        else:
            lo = mid + 1
    return lo

al.check("07.pick_m", choose)

# %% right: Decimal arithmetic and a ceiling by rounding up
from decimal import Decimal, ROUND_CEILING

def choose(p, target):
    t = Decimal(str(target))
    return int(((p - 1) * (1 - t) / t).to_integral_value(rounding=ROUND_CEILING))

al.check("07.pick_m", choose)

# %% right: the bubble worked out from step times, the loop stops when idle time is small enough
def choose(p, target):
    def step(m):
        return (m + p - 1) * 3.0            # any t_f + t_b: it cancels out
    m = 1
    while 1 - m * 3.0 / step(m) > target + 1e-12:
        m += 1
    return m

al.check("07.pick_m", choose)

# %% right: integer ceiling on floats, cast to int
def choose(p, target):
    return int(-(-(p - 1) * (1 - target) // target))

al.check("07.pick_m", choose)

# %% wrong "is enough": one micro-batch more than needed (ceil + 1)
import math

def choose(p, target):
    return math.ceil((p - 1) * (1 - target) / target) + 1

al.check("07.pick_m", choose)

# %% wrong "over the target": one micro-batch fewer than needed (ceil - 1)
import math

def choose(p, target):
    return math.ceil((p - 1) * (1 - target) / target) - 1

al.check("07.pick_m", choose)

# %% wrong "over the target": rounded down with int() instead of up
def choose(p, target):
    return int((p - 1) * (1 - target) / target)

al.check("07.pick_m", choose)

# %% wrong "over the target": math.floor instead of math.ceil
import math

def choose(p, target):
    return math.floor((p - 1) / target - (p - 1))

al.check("07.pick_m", choose)

# %% wrong "positive integer": the exact solution returned as a float
def choose(p, target):
    return (p - 1) * (1 - target) / target

al.check("07.pick_m", choose)

# %% wrong "positive integer": numpy's ceil, which returns a float
import numpy as np

def choose(p, target):
    return np.ceil((p - 1) * (1 - target) / target)

al.check("07.pick_m", choose)

# %% wrong "positive integer": the integer-ceiling trick -(-a // b) on floats gives a float
def choose(p, target):
    return -(-(p - 1) * (1 - target) // target)

al.check("07.pick_m", choose)

# %% wrong "is enough": the bubble as a share of the ideal time, (p-1)/m, solved instead
import math

def choose(p, target):
    return math.ceil((p - 1) / target)

al.check("07.pick_m", choose)

# %% wrong "is enough": p stages in the bubble instead of p - 1
import math

def choose(p, target):
    return math.ceil(p * (1 - target) / target)

al.check("07.pick_m", choose)

# %% wrong "over the target": p subtracted instead of p - 1 when solving for m
import math

def choose(p, target):
    return math.ceil((p - 1) / target) - p

al.check("07.pick_m", choose)

# %% wrong "is enough": the largest m under a cap that fits, max() instead of the first
def choose(p, target):
    return max(m for m in range(1, 500) if (p - 1) / (m + p - 1) <= target)

al.check("07.pick_m", choose)

# %% wrong "over the target": the micro-batches shared out over the stages, per stage
import math

def choose(p, target):
    total = math.ceil((p - 1) * (1 - target) / target)
    return math.ceil(total / p)

al.check("07.pick_m", choose)

# %% wrong: a fixed number of micro-batches, as the starter
def choose(p, target):
    return 64

al.check("07.pick_m", choose)

# %% wrong "the checker compares with the formula and the simulator": measuring the bubble on the simulator
from asynclab.metrics import bubble_fraction

def choose(p, target):
    m = 1
    while bubble_fraction(schedules.simulate_trace("gpipe", p, m)).mean > target:
        m += 1
    return m

al.check("07.pick_m", choose)

# %% right: bisect over the candidates with a key (Python 3.10+)
import bisect

def choose(p, target):
    candidates = range(1, 100_000)
    return candidates[bisect.bisect_left(candidates, True, key=lambda m: (p - 1) / (m + p - 1) <= target)]

al.check("07.pick_m", choose)

# %% right: a numpy int64 returned as it is (numpy's integers count as integers)
import numpy as np

def choose(p, target):
    m = np.arange(1, 100_000)
    return m[(p - 1) / (m + p - 1) <= target][0]

al.check("07.pick_m", choose)

# %% right: a callable object, the ceiling as integer division on exact fractions
from fractions import Fraction

class Chooser:
    def __call__(self, p, target):
        t = Fraction(str(target))
        need = (p - 1) * (1 - t) / t
        return max(1, -(-need.numerator // need.denominator))

al.check("07.pick_m", Chooser())

# %% right: the answer cached per (p, target) with functools.lru_cache
import functools, math

@functools.lru_cache(maxsize=None)
def choose(p, target):
    return max(1, math.ceil((p - 1) * (1 - target) / target))

al.check("07.pick_m", choose)

# %% wrong "over the target": round() instead of a ceiling
def choose(p, target):
    return max(1, round((p - 1) * (1 - target) / target))

al.check("07.pick_m", choose)

# %% wrong "positive integer": a bool for "enough" (True == 1 in Python, but it is not a count)
al.check("07.pick_m", lambda p, target: True)

# %% wrong "over the target": the target read as a percentage
import math

def choose(p, target):
    pct = target * 100
    return max(1, math.ceil((p - 1) * (100 - pct) / 100))

al.check("07.pick_m", choose)

# %% wrong "work it out from p and the target": gaming: asks the simulator from a thread (the refusal reaches every thread)
import threading
from asynclab import schedules
from asynclab.metrics import bubble_fraction

def choose(p, target):
    box = {}
    def work():
        m = 1
        while bubble_fraction(schedules.simulate_trace("gpipe", p, m)).mean > target:
            m += 1
        box["m"] = m
    t = threading.Thread(target=work)
    t.start(); t.join()
    return box["m"]

al.check("07.pick_m", choose)

# %% right: a loop on the inequality cross-multiplied (no division)
def choose(p, target):
    m = 1
    while p - 1 > target * (m + p - 1):
        m += 1
    return m

al.check("07.pick_m", choose)

# %% right: a strict >= in the loop (the checker's targets never fall exactly on a boundary)
def choose(p, target):
    m = 1
    while (p - 1) / (m + p - 1) >= target:
        m += 1
    return m

al.check("07.pick_m", choose)

# %% right: ceil((p-1)/target) - (p-1): the step in stage-times, less the bubble
import math

def choose(p, target):
    return math.ceil((p - 1) / target) - p + 1

al.check("07.pick_m", choose)

# %% right: min() over a filtered range
def choose(p, target):
    return min(m for m in range(1, 10**5) if (p - 1) / (m + p - 1) <= target)

al.check("07.pick_m", choose)

# %% right: a callable class with a cache dict
import math

class Picker:
    def __init__(self):
        self.seen = {}

    def __call__(self, p, target):
        key = (p, target)
        if key not in self.seen:
            self.seen[key] = max(1, math.ceil((p - 1) * (1 - target) / target))
        return self.seen[key]

al.check("07.pick_m", Picker())

# %% right: functools.partial of a general solver over bubble functions
import functools, itertools

def fewest(bubble, p, target):
    return next(m for m in itertools.count(1) if bubble(p, m) <= target)

def gpipe_bubble(p, m):
    return (p - 1) / (m + p - 1)

choose = functools.partial(fewest, gpipe_bubble)
al.check("07.pick_m", choose)

# %% right: math.ceil with a small epsilon taken off against float noise
import math

def choose(p, target):
    return max(1, math.ceil((p - 1) * (1 - target) / target - 1e-9))

al.check("07.pick_m", choose)

# %% right: integer arithmetic on the target in thousandths
def choose(p, target):
    t = round(target * 1000)
    return max(1, -(-(p - 1) * (1000 - t) // t))

al.check("07.pick_m", choose)

# %% right: torch float64 on the CPU, ceil, then int
def choose(p, target):
    x = torch.tensor((p - 1) * (1 - target) / target, dtype=torch.float64)
    return max(1, int(torch.ceil(x).item()))

al.check("07.pick_m", choose)

# %% limit: torch on the GPU (float32), ceil, then int
def choose(p, target):
    x = torch.tensor([(p - 1) * (1 - target) / target], device="cuda")
    return max(1, int(torch.ceil(x).item()))

al.check("07.pick_m", choose)

# %% right: a numpy int32 count (numpy's integers are integers)
import numpy as np

def choose(p, target):
    return np.int32(np.ceil((p - 1) * (1 - target) / target))

al.check("07.pick_m", choose)

# %% wrong "work it out from p and the target": gaming: bubble_formula asked from a ThreadPoolExecutor worker (the refusal reaches every thread)
from concurrent.futures import ThreadPoolExecutor
from asynclab import schedules

_pool = ThreadPoolExecutor(max_workers=1)

def choose(p, target):
    m = 1
    while _pool.submit(schedules.bubble_formula, "gpipe", p, m).result()["of_total"] > target + 1e-12:
        m += 1
    return m

al.check("07.pick_m", choose)

# %% wrong "is enough": counted from m = 0, then one added "for safety"
def choose(p, target):
    m = 0
    while (p - 1) / (m + p - 1) > target:
        m += 1
    return m + 1

al.check("07.pick_m", choose)

# %% wrong "over the target": the bubble written as (p-1)/(m+p) (one stage-time short)
import math

def choose(p, target):
    return max(1, math.ceil((p - 1) / target - p))

al.check("07.pick_m", choose)

# %% wrong "over the target": the target read as the busy share: m/(m+p-1) >= target
def choose(p, target):
    m = 1
    while m / (m + p - 1) < target:
        m += 1
    return m

al.check("07.pick_m", choose)

# %% wrong "positive integer": math.ceil wrapped in float()
import math

def choose(p, target):
    return float(math.ceil((p - 1) * (1 - target) / target))

al.check("07.pick_m", choose)

# %% wrong "positive integer": the count as a string
import math

def choose(p, target):
    return str(math.ceil((p - 1) * (1 - target) / target))

al.check("07.pick_m", choose)

# %% wrong "positive integer": the count in a list
import math

def choose(p, target):
    return [math.ceil((p - 1) * (1 - target) / target)]

al.check("07.pick_m", choose)

# %% wrong "positive integer": a torch tensor from torch.ceil, never turned into an int
def choose(p, target):
    return torch.ceil(torch.tensor((p - 1) * (1 - target) / target))

al.check("07.pick_m", choose)

# %% wrong "is enough": m rounded up to a power of two "for balanced micro-batches"
import math

def choose(p, target):
    m = math.ceil((p - 1) * (1 - target) / target)
    return 1 << (m - 1).bit_length()

al.check("07.pick_m", choose)

# %% wrong "over the target": the stages counted as p - 2 in the bubble
import math

def choose(p, target):
    return max(1, math.ceil((p - 2) * (1 - target) / target))

al.check("07.pick_m", choose)

# %% wrong "is enough": a multiple of p micro-batches, rounded up
import math

def choose(p, target):
    m = math.ceil((p - 1) * (1 - target) / target)
    return p * math.ceil(m / p)

al.check("07.pick_m", choose)

# %% right: count up from one until the bubble is small enough
def choose(p, target):
    m = 1
    while (p - 1) / (m + p - 1) > target:
        m += 1
    return m

al.check("07.pick_m", choose)

# %% right: exact arithmetic with fractions
from fractions import Fraction
import math

def choose(p, target):
    t = Fraction(target)
    return max(1, math.ceil((p - 1) * (1 - t) / t))

al.check("07.pick_m", choose)

# %% wrong: Megatron's (p - 1) / m <= target instead of the share of the step
import math

def choose(p, target):
    return max(1, math.ceil((p - 1) / target))

al.check("07.pick_m", choose)

# %% wrong: round() instead of ceil()
def choose(p, target):
    return max(1, round((p - 1) * (1 - target) / target))

al.check("07.pick_m", choose)

# %% wrong: floor division, one short whenever the bound is not whole
def choose(p, target):
    return max(1, int((p - 1) * (1 - target) // target))

al.check("07.pick_m", choose)

# %% wrong: the bubble fraction itself, not m
def choose(p, target):
    m = 1
    while (p - 1) / (m + p - 1) > target:
        m += 1
    return (p - 1) / (m + p - 1)

al.check("07.pick_m", choose)
