# Learner answers to lesson 01's exercise 1 (01.enqueue_span): the host's time to issue the twenty products, in ms.
# Each cell is run after the notebook's set-up; see tests/answers.py for the format.

# %% right: a merge of each kernel with its launch row, a numpy float64 span
ev = run.reference_trace("host_runs_ahead").events
k = ev[ev["kind"] == "compute"][["launch"]].dropna().astype(int)
rows = ev.join(k.set_index("launch"), how="inner")
al.check("01.enqueue_span", (rows["end_us"].max() - rows["start_us"].min()) / 1000)

# %% right: the span as a plain float from a loop over the kernels' launch indices
ev = run.reference_trace("host_runs_ahead").events
starts, ends = [], []
for idx in ev.loc[ev.kind == "compute", "launch"]:
    starts.append(ev.at[int(idx), "start_us"])
    ends.append(ev.at[int(idx), "end_us"])
al.check("01.enqueue_span", float(max(ends) - min(starts)) / 1e3)

# %% wrong: the kernels' own span on the GPU, not their launches
ev = run.reference_trace("host_runs_ahead").events
k = ev[ev.kind == "compute"]
al.check("01.enqueue_span", (k.end_us.max() - k.start_us.min()) / 1e3)

# %% wrong: every launch row, the final synchronize included
ev = run.reference_trace("host_runs_ahead").events
l = ev[ev.kind == "launch"]
al.check("01.enqueue_span", (l.end_us.max() - l.start_us.min()) / 1e3)

# %% wrong: left in microseconds
ev = run.reference_trace("host_runs_ahead").events
l = ev.loc[ev[ev.kind == "compute"].launch.astype(int)]
al.check("01.enqueue_span", l.end_us.max() - l.start_us.min())

# %% wrong: a NaN from a filter that matched nothing ("kernel" is not a kind)
ev = run.reference_trace("host_runs_ahead").events
l = ev.loc[ev[ev.kind == "kernel"].launch.dropna().astype(int)]
al.check("01.enqueue_span", (l.end_us.max() - l.start_us.min()) / 1e3)

# %% wrong: the span formatted as a string
ev = run.reference_trace("host_runs_ahead").events
l = ev.loc[ev[ev.kind == "compute"].launch.astype(int)]
al.check("01.enqueue_span", f"{(l.end_us.max() - l.start_us.min()) / 1e3:.3f}")

# %% wrong: infinity (min and max swapped into a division)
al.check("01.enqueue_span", float("inf"))

# %% wrong: the enqueue annotation's own length (it brackets more than the launches)
ev = run.reference_trace("host_runs_ahead").events
a = ev[(ev.kind == "annotation") & ev.name.str.startswith("enqueue")].iloc[0]
al.check("01.enqueue_span", a.dur_us / 1e3)
