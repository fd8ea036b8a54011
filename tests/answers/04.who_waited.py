# Learner answers to lesson 04's exercise 2 (04.who_waited): the (waiter, waited_for) stream pairs of the trace.
# Each cell is run after the notebook's set-up; see tests/answers.py for the format.

# %% right: stream numbers parsed from al.stream_waits' lanes
import re

trace = run.reference_trace("cell_who_waited")  # the recording of the cell that drew the timeline
w = al.stream_waits(trace)
num = lambda lane: int(re.search(r"stream (\d+)", lane).group(1))
al.check("04.who_waited", {(num(a), num(b)) for a, b in zip(w["lane"], w["waited_for"])})

# %% right: read off the timeline by hand
al.check("04.who_waited", {(7, 46), (50, 42)})

# %% wrong: the pairs the wrong way round
al.check("04.who_waited", {(46, 7), (42, 50)})

# %% wrong: one pair missing
al.check("04.who_waited", {(50, 42)})

# %% wrong: an idle stream added as a waiter
al.check("04.who_waited", {(7, 46), (50, 42), (54, 7)})
