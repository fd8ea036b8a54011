# Learner answers to lesson 03's exercise 2 (03.which_gain): the workloads that ran at least 1.2x faster with streams.
# Each cell is run after the notebook's set-up; see tests/answers.py for the format.

# %% right: from the reference figures, the speed-ups of 1.2x or more
a = run.reference("spin_kernels")["speedup"] >= 1.2
b = run.reference("tail_effect")["tail_fill_speedup"] >= 1.2
c = run.reference("parallel_module")["small"]["speedup"] >= 1.2
al.check("03.which_gain", {name for name, ok in [("four spin kernels", a), ("a kernel's tail filled by another", b),
                                                  ("Parallel, small branches", c)] if ok})

# %% wrong: the big matrix products added (they fill the GPU)
al.check("03.which_gain", {"four spin kernels", "a kernel's tail filled by another", "Parallel, small branches",
                           "two big matmuls"})

# %% wrong: the tiny matmuls instead of the tail
al.check("03.which_gain", {"four spin kernels", "eight tiny matmuls", "Parallel, small branches"})

# %% wrong: every workload
from asynclab.lessons.streams.exercises import GAIN_FIGURES

al.check("03.which_gain", set(GAIN_FIGURES))
