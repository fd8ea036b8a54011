# Answers to lesson 07's exercise 1 (07.step_time), written the way learners write them.
# Each cell runs in a fresh process after the notebook's set-up; tests/answers.py says how.

# %% right: the closed form, as the published solution
def predict(p, m, t_f, t_b):
    return (m + p - 1) * (t_f + t_b)

al.check("07.step_time", predict)

# %% right: the ideal time plus the bubble, written as two terms
def predict(p, m, t_f, t_b):
    ideal = m * (t_f + t_b)
    bubble = (p - 1) * (t_f + t_b)
    return ideal + bubble

al.check("07.step_time", predict)

# %% right: the forward phase and the backward phase, each (m + p - 1) stage-times
def predict(p, m, t_f, t_b):
    forward = (m + p - 1) * t_f
    backward = (m + p - 1) * t_b
    return forward + backward

al.check("07.step_time", predict)

# %% right: a loop that adds up the ticks of the schedule
def predict(p, m, t_f, t_b):
    total = 0.0
    for tick in range(m + p - 1):
        total += t_f + t_b
    return total

al.check("07.step_time", predict)

# %% right: following the last micro-batch through the stages, forward then backward
def predict(p, m, t_f, t_b):
    last_forward_ends = (m - 1) * t_f + p * t_f      # it enters stage 0 after m-1 forwards, then crosses p stages
    return last_forward_ends + (m - 1) * t_b + p * t_b  # the last stage's backwards, then back through the stages

al.check("07.step_time", predict)

# %% right: a small simulation of its own, each op's end from its neighbours'
def predict(p, m, t_f, t_b):
    fwd = [[0.0] * m for _ in range(p)]
    for s in range(p):
        for i in range(m):
            start = max(fwd[s][i - 1] if i else 0.0, fwd[s - 1][i] if s else 0.0)
            fwd[s][i] = start + t_f
    bwd = [[0.0] * m for _ in range(p)]
    for s in reversed(range(p)):
        for i in range(m):
            free = bwd[s][i - 1] if i else fwd[s][m - 1]
            need = bwd[s + 1][i] if s < p - 1 else fwd[s][i]
            bwd[s][i] = max(free, need) + t_b
    return max(bwd[0][m - 1], max(row[m - 1] for row in bwd))

al.check("07.step_time", predict)

# %% right: the ideal time divided by the share of the step that is busy
def predict(p, m, t_f, t_b):
    bubble = (p - 1) / (m + p - 1)
    return m * (t_f + t_b) / (1 - bubble)

al.check("07.step_time", predict)

# %% right: with numpy, one entry per tick
import numpy as np

def predict(p, m, t_f, t_b):
    ticks = np.full(m + p - 1, t_f + t_b)
    return float(ticks.sum())

al.check("07.step_time", predict)

# %% right: with Fraction, exact decimals, then a float
from fractions import Fraction

def predict(p, m, t_f, t_b):
    exact = (m + p - 1) * (Fraction(str(t_f)) + Fraction(str(t_b)))
    return float(exact)

al.check("07.step_time", predict)

# %% right: a lambda with a sum over a generator
predict = lambda p, m, t_f, t_b: sum(t_f + t_b for _ in range(m + p - 1))

al.check("07.step_time", predict)

# %% right: math.fsum over the stage-times of the forward and the backward passes
import math

def predict(p, m, t_f, t_b):
    ticks = m + p - 1
    return math.fsum([t_f] * ticks + [t_b] * ticks)

al.check("07.step_time", predict)

# %% right: the pipeline fill, the steady state and the drain, and checked twice
def predict(p, m, t_f, t_b):
    fill = (p - 1) * t_f
    steady = m * (t_f + t_b)
    drain = (p - 1) * t_b
    return fill + steady + drain

al.check("07.step_time", predict)
al.check("07.step_time", predict)

# %% wrong "time with no bubble": no bubble, as the starter
def predict(p, m, t_f, t_b):
    return m * (t_f + t_b)

al.check("07.step_time", predict)

# %% wrong "count how many stage-times": one tick too many, (m + p)
def predict(p, m, t_f, t_b):
    return (m + p) * (t_f + t_b)

al.check("07.step_time", predict)

# %% wrong "you said": one tick too few, (m + p - 2)
def predict(p, m, t_f, t_b):
    return (m + p - 2) * (t_f + t_b)

al.check("07.step_time", predict)

# %% wrong "count how many stage-times": every micro-batch on every stage one after another, m * p
def predict(p, m, t_f, t_b):
    return m * p * (t_f + t_b)

al.check("07.step_time", predict)

# %% wrong "you said": only the forward pass
def predict(p, m, t_f, t_b):
    return (m + p - 1) * t_f

al.check("07.step_time", predict)

# %% wrong "you said": the bubble counted on the forward pass only
def predict(p, m, t_f, t_b):
    return (m + p - 1) * t_f + m * t_b

al.check("07.step_time", predict)

# %% wrong "count how many stage-times": the bubble counted twice, once each way
def predict(p, m, t_f, t_b):
    return (m + 2 * (p - 1)) * (t_f + t_b)

al.check("07.step_time", predict)

# %% wrong "you said": the step spread over the stages, divided by p
def predict(p, m, t_f, t_b):
    return (m + p - 1) * (t_f + t_b) / p

al.check("07.step_time", predict)

# %% wrong "you said": the longer of forward and backward, taken as a stage-time
def predict(p, m, t_f, t_b):
    return (m + p - 1) * max(t_f, t_b)

al.check("07.step_time", predict)

# %% wrong "count how many stage-times": the bubble fraction instead of the time
def predict(p, m, t_f, t_b):
    return (p - 1) / (m + p - 1)

al.check("07.step_time", predict)

# %% wrong "count how many stage-times": rounded to whole milliseconds
def predict(p, m, t_f, t_b):
    return round((m + p - 1) * (t_f + t_b))

al.check("07.step_time", predict)

# %% wrong "must be a finite number": the time returned as a string with its unit
def predict(p, m, t_f, t_b):
    return f"{(m + p - 1) * (t_f + t_b):.2f} ms"

al.check("07.step_time", predict)

# %% wrong "the checker compares with the simulator": asking the simulator for the answer
def predict(p, m, t_f, t_b):
    return max(op.end for op in schedules.simulate("gpipe", p, m, t_f, t_b))

al.check("07.step_time", predict)

# %% right: p and m named the other way round (the formula is symmetric in them)
def predict(m, p, t_b, t_f):
    return (m + p - 1) * (t_f + t_b)

al.check("07.step_time", predict)

# %% right: a dynamic program over (stage, micro-batch) for the forward and the backward
def predict(p, m, t_f, t_b):
    f = [[0.0] * m for _ in range(p)]
    for s in range(p):
        for j in range(m):
            f[s][j] = max(f[s - 1][j] if s else 0.0, f[s][j - 1] if j else 0.0) + t_f
    b = [[0.0] * m for _ in range(p)]
    for s in reversed(range(p)):
        for j in range(m):
            ready = f[p - 1][m - 1] if (s == p - 1 and j == 0) else 0.0
            b[s][j] = max(ready, b[s + 1][j] if s < p - 1 else 0.0, b[s][j - 1] if j else 0.0) + t_b
    return b[0][m - 1]

al.check("07.step_time", predict)

# %% right: numpy float32 arithmetic (within the checker's 1e-6)
import numpy as np

def predict(p, m, t_f, t_b):
    return np.float32(m + p - 1) * np.float32(t_f + t_b)

al.check("07.step_time", predict)

# %% right: a torch scalar read with .item()
def predict(p, m, t_f, t_b):
    return (torch.tensor(float(m + p - 1)) * (t_f + t_b)).item()

al.check("07.step_time", predict)

# %% wrong "must be a finite number": the same formula as a 0-d tensor, never read
def predict(p, m, t_f, t_b):
    return torch.tensor(float(m + p - 1)) * (t_f + t_b)

al.check("07.step_time", predict)

# %% wrong "must be a finite number": forgot the return
def predict(p, m, t_f, t_b):
    step = (m + p - 1) * (t_f + t_b)

al.check("07.step_time", predict)

# %% wrong "you said": floor division to whole milliseconds
def predict(p, m, t_f, t_b):
    return (m + p - 1) * (t_f + t_b) // 1

al.check("07.step_time", predict)

# %% wrong: gaming: replaces the simulator the checker compares with (the checker keeps its own)
from asynclab import schedules
from types import SimpleNamespace

def predict(p, m, t_f, t_b):
    schedules.simulate = lambda *a, **k: [SimpleNamespace(end=42.0)]
    return 42.0

al.check("07.step_time", predict)

# %% right: functools.reduce over the ticks of the schedule
import functools

def predict(p, m, t_f, t_b):
    return functools.reduce(lambda total, _: total + t_f + t_b, range(m + p - 1), 0.0)

al.check("07.step_time", predict)

# %% right: a callable class that keeps the schedule's name
class GPipeModel:
    schedule = "gpipe"

    def ticks(self, p, m):
        return m + p - 1

    def __call__(self, p, m, t_f, t_b):
        return self.ticks(p, m) * (t_f + t_b)

al.check("07.step_time", GPipeModel())

# %% right: functools.partial of a general helper with the bubble stages as a keyword
import functools

def step_ms(p, m, t_f, t_b, *, fill_stages):
    return (m + fill_stages) * (t_f + t_b)

def predict(p, m, t_f, t_b):
    return functools.partial(step_ms, fill_stages=p - 1)(p, m, t_f, t_b)

al.check("07.step_time", predict)

# %% right: recursion on m, one micro-batch alone crossing all p stages
def predict(p, m, t_f, t_b):
    if m == 1:
        return p * (t_f + t_b)
    return predict(p, m - 1, t_f, t_b) + t_f + t_b

al.check("07.step_time", predict)

# %% right: Decimal arithmetic on the decimal inputs, turned into a float
from decimal import Decimal

def predict(p, m, t_f, t_b):
    return float((m + p - 1) * (Decimal(str(t_f)) + Decimal(str(t_b))))

al.check("07.step_time", predict)

# %% right: a per-stage clock, forward sweep then backward sweep
def predict(p, m, t_f, t_b):
    free = [0.0] * p
    for _ in range(m):
        t = 0.0
        for s in range(p):
            t = max(t, free[s]) + t_f
            free[s] = t
    last_fwd = free[p - 1]
    free = [0.0] * p
    free[p - 1] = last_fwd
    for _ in range(m):
        t = 0.0
        for s in reversed(range(p)):
            t = max(t, free[s]) + t_b
            free[s] = t
    return free[0]

al.check("07.step_time", predict)

# %% right: torch float64 on the CPU, read with .item()
def predict(p, m, t_f, t_b):
    t = torch.tensor([t_f, t_b], dtype=torch.float64)
    return ((m + p - 1) * t.sum()).item()

al.check("07.step_time", predict)

# %% right: the device picked with torch.cuda.is_available(), float64
dev = "cuda" if torch.cuda.is_available() else "cpu"

def predict(p, m, t_f, t_b):
    t = torch.tensor([t_f, t_b], dtype=torch.float64, device=dev)
    return float((m + p - 1) * t.sum())

al.check("07.step_time", predict)

# %% limit: torch on the GPU in float32, read with .item()
def predict(p, m, t_f, t_b):
    t = torch.tensor([t_f, t_b], device="cuda")
    return ((m + p - 1) * t.sum()).item()

al.check("07.step_time", predict)

# %% right: rounded to two decimals, like the inputs (the product of 2-decimal numbers by an integer has 2 decimals)
def predict(p, m, t_f, t_b):
    return round((m + p - 1) * (t_f + t_b), 2)

al.check("07.step_time", predict)

# %% right: an exact Fraction returned as it is (a Fraction is a real number)
from fractions import Fraction

def predict(p, m, t_f, t_b):
    return (m + p - 1) * (Fraction(str(t_f)) + Fraction(str(t_b)))

al.check("07.step_time", predict)

# %% wrong "work it out from p, m, t_f and t_b": gaming: asks the simulator from a ThreadPoolExecutor worker (the refusal reaches every thread)
from concurrent.futures import ThreadPoolExecutor
from asynclab import schedules

_pool = ThreadPoolExecutor(max_workers=1)

def predict(p, m, t_f, t_b):
    ops = _pool.submit(schedules.simulate, "gpipe", p, m, t_f, t_b).result()
    return max(op.end for op in ops)

al.check("07.step_time", predict)

# %% wrong "must be a finite number": an exact Decimal returned as it is (Decimal is not a numbers.Real)
from decimal import Decimal

def predict(p, m, t_f, t_b):
    return (m + p - 1) * (Decimal(str(t_f)) + Decimal(str(t_b)))

al.check("07.step_time", predict)

# %% wrong "you said": the time per micro-batch (the step divided by m)
def predict(p, m, t_f, t_b):
    return (m + p - 1) * (t_f + t_b) / m

al.check("07.step_time", predict)

# %% wrong "you said": the bubble counted on the backward only
def predict(p, m, t_f, t_b):
    return m * (t_f + t_b) + (p - 1) * t_b

al.check("07.step_time", predict)

# %% wrong "you said": the backward taken as twice the forward (the rule of thumb, not the given t_b)
def predict(p, m, t_f, t_b):
    return (m + p - 1) * 3 * t_f

al.check("07.step_time", predict)

# %% wrong "you said": the step in seconds
def predict(p, m, t_f, t_b):
    return (m + p - 1) * (t_f + t_b) / 1000

al.check("07.step_time", predict)

# %% wrong "you said": the bubble as the longer pass times (p - 1)
def predict(p, m, t_f, t_b):
    return m * (t_f + t_b) + (p - 1) * max(t_f, t_b)

al.check("07.step_time", predict)

# %% wrong "must be a finite number": forward and backward returned as a pair
def predict(p, m, t_f, t_b):
    return (m + p - 1) * t_f, (m + p - 1) * t_b

al.check("07.step_time", predict)

# %% wrong "you said": arguments taken in another order (t_f, t_b, p, m)
def predict(t_f, t_b, p, m):
    return (m + p - 1) * (t_f + t_b)

al.check("07.step_time", predict)

# %% wrong "you said": rounded to one decimal
def predict(p, m, t_f, t_b):
    return round((m + p - 1) * (t_f + t_b), 1)

al.check("07.step_time", predict)

# %% wrong "must be a finite number": printed instead of returned
def predict(p, m, t_f, t_b):
    print((m + p - 1) * (t_f + t_b))

al.check("07.step_time", predict)

# %% wrong "you said": the 1F1B warm-up counted on top: p - 1 extra forwards
def predict(p, m, t_f, t_b):
    return (m + p - 1) * (t_f + t_b) + (p - 1) * t_f

al.check("07.step_time", predict)

# %% right: a dynamic programme over the GPipe schedule (all forwards, then all backwards)
def predict(p, m, t_f, t_b):
    f = [[0.0] * (m + 1) for _ in range(p + 1)]
    for s in range(1, p + 1):
        for i in range(1, m + 1):
            f[s][i] = max(f[s - 1][i], f[s][i - 1]) + t_f
    b = [[0.0] * (m + 2) for _ in range(p + 2)]
    for s in range(p, 0, -1):
        for i in range(1, m + 1):
            ready = f[p][m] if s == p and i == 1 else 0.0
            b[s][i] = max(b[s + 1][i] if s < p else f[p][m], b[s][i - 1], ready) + t_b
    return b[1][m]

al.check("07.step_time", predict)

# %% right: the ideal time divided by one minus the bubble fraction
def predict(p, m, t_f, t_b):
    bubble = (p - 1) / (m + p - 1)
    return m * (t_f + t_b) / (1 - bubble)

al.check("07.step_time", predict)

# %% wrong: one stage-time too many, (m + p)
def predict(p, m, t_f, t_b):
    return (m + p) * (t_f + t_b)

al.check("07.step_time", predict)

# %% wrong: the fill and drain counted on the forward only
def predict(p, m, t_f, t_b):
    return (m + p - 1) * t_f + m * t_b

al.check("07.step_time", predict)

# %% wrong: rounded to whole milliseconds, round() of the formula
def predict(p, m, t_f, t_b):
    return round((m + p - 1) * (t_f + t_b))

al.check("07.step_time", predict)

# %% wrong: a formatted string
def predict(p, m, t_f, t_b):
    return f"{(m + p - 1) * (t_f + t_b):.3f} ms"

al.check("07.step_time", predict)

# %% wrong: Megatron's bubble (p - 1) / m taken as the extra share of the step
def predict(p, m, t_f, t_b):
    return m * (t_f + t_b) * (1 + (p - 1) / m) / p

al.check("07.step_time", predict)
