# Learner answers to lesson 06's exercise 2 (06.both_ways): the predicted time of a 1 GiB copy each way at once.
# Each cell is run after the notebook's set-up; see tests/answers.py for the format.

# %% right: full duplex, so about the one-way time (a few percent more)
bw = run.reference("bandwidth")
al.check("06.both_ways", 1.05 * bw["one_way_ms"])

# %% right: as a numpy float64
import numpy as np

bw = run.reference("bandwidth")
al.check("06.both_ways", np.float64(bw["one_way_ms"]))

# %% wrong: the link shared by the two directions (twice the one-way time)
bw = run.reference("bandwidth")
al.check("06.both_ways", 2.0 * bw["one_way_ms"])

# %% wrong: half the one-way time (bandwidth doubled, bytes not)
bw = run.reference("bandwidth")
al.check("06.both_ways", bw["one_way_ms"] / 2)

# %% wrong: NaN
al.check("06.both_ways", float("nan"))

# %% wrong: a string
bw = run.reference("bandwidth")
al.check("06.both_ways", str(round(bw["one_way_ms"], 2)))

# %% wrong: in seconds
bw = run.reference("bandwidth")
al.check("06.both_ways", bw["one_way_ms"] / 1000)
