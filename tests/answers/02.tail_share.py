# Learner answers to lesson 02's exercise 2 (02.tail_share): the share of timings more than 10% above the median.
# Each cell is run after the notebook's set-up; see tests/answers.py for the format.

# %% right: numpy, a numpy float64 share
import numpy as np

t = np.asarray(run.reference("spread")["times_ms"])
al.check("02.tail_share", (t > 1.1 * np.median(t)).mean())

# %% right: pandas Series
import pandas as pd

s = pd.Series(run.reference("spread")["times_ms"])
al.check("02.tail_share", float((s > 1.1 * s.median()).mean()))

# %% right: torch's median (the lower middle value of an even count), .item()
t = torch.tensor(run.reference("spread")["times_ms"], dtype=torch.float64)
al.check("02.tail_share", (t > 1.1 * t.median()).double().mean().item())

# %% wrong: as a percentage
import statistics

times = run.reference("spread")["times_ms"]
m = statistics.median(times)
al.check("02.tail_share", 100 * sum(x > 1.1 * m for x in times) / len(times))

# %% wrong: the count, not the share
import statistics

times = run.reference("spread")["times_ms"]
m = statistics.median(times)
al.check("02.tail_share", sum(1 for x in times if x > 1.1 * m))

# %% wrong: the mean instead of the median as the reference point
times = run.reference("spread")["times_ms"]
mean = sum(times) / len(times)
al.check("02.tail_share", sum(x > 1.1 * mean for x in times) / len(times))

# %% wrong: NaN (the median of an empty list of the wrong key)
import numpy as np

al.check("02.tail_share", float(np.nan))

# %% wrong: a string
al.check("02.tail_share", "0.2")

# %% wrong: the share of timings within 10% of the median (the complement)
import statistics

times = run.reference("spread")["times_ms"]
m = statistics.median(times)
al.check("02.tail_share", sum(x <= 1.1 * m for x in times) / len(times))
