# Learner answers to lesson 06's exercise 2 (06.both_ways): the predicted time of a 1 GiB copy each way at once.
# Each cell is run after the notebook's set-up; see tests/answers.py for the format. one_way_ms is what section 3's
# bandwidth cell recorded (4 copies of 1 GiB a run), the figure the page prints above the exercise.

# %% right: full duplex, so about the one-way time (a few percent more)
from asynclab.course import cells
one_way_ms = cells.recorded(run.lesson.reference_dir, "p2p_bandwidth")["ms"]["one way"] / 4
al.check("06.both_ways", 1.05 * one_way_ms)

# %% right: as a numpy float64
import numpy as np

from asynclab.course import cells
one_way_ms = cells.recorded(run.lesson.reference_dir, "p2p_bandwidth")["ms"]["one way"] / 4
al.check("06.both_ways", np.float64(one_way_ms))

# %% wrong: the link shared by the two directions (twice the one-way time)
from asynclab.course import cells
one_way_ms = cells.recorded(run.lesson.reference_dir, "p2p_bandwidth")["ms"]["one way"] / 4
al.check("06.both_ways", 2.0 * one_way_ms)

# %% wrong: half the one-way time (bandwidth doubled, bytes not)
from asynclab.course import cells
one_way_ms = cells.recorded(run.lesson.reference_dir, "p2p_bandwidth")["ms"]["one way"] / 4
al.check("06.both_ways", one_way_ms / 2)

# %% wrong: NaN
al.check("06.both_ways", float("nan"))

# %% wrong: a string
from asynclab.course import cells
one_way_ms = cells.recorded(run.lesson.reference_dir, "p2p_bandwidth")["ms"]["one way"] / 4
al.check("06.both_ways", str(round(one_way_ms, 2)))

# %% wrong: in seconds
from asynclab.course import cells
one_way_ms = cells.recorded(run.lesson.reference_dir, "p2p_bandwidth")["ms"]["one way"] / 4
al.check("06.both_ways", one_way_ms / 1000)
