# Learner answers to lesson 01's exercise 2 (01.sync_ops): the set of ops that make the host wait.
# Each cell is run after the notebook's set-up; see tests/answers.py for the format.

# %% right: the six names, built from the table's rows
ref = run.reference("hidden_syncs")
al.check("01.sync_ops", {row["op"] for row in ref["ops"] if row["waited_ms"] > 0.5 * row["spin_ms"]})

# %% right: typed as a frozenset, in another order
al.check("01.sync_ops", frozenset({"t[t > 0]", "if t.sum() > 0:", "torch.nonzero(t)", ".cpu()", "print(t)", ".item()"}))

# %% wrong: t.sum() added (it stays on the GPU)
al.check("01.sync_ops", {".item()", "print(t)", ".cpu()", "torch.nonzero(t)", "if t.sum() > 0:", "t[t > 0]", "t.sum()"})

# %% wrong: the boolean mask forgotten
al.check("01.sync_ops", {".item()", "print(t)", ".cpu()", "torch.nonzero(t)", "if t.sum() > 0:"})

# %% wrong: the non_blocking copy to pinned memory counted as a wait
al.check("01.sync_ops", {".item()", "print(t)", ".cpu()", "torch.nonzero(t)", "if t.sum() > 0:", "t[t > 0]",
                         't.to("cpu", non_blocking=True)'})

# %% wrong: an empty set
al.check("01.sync_ops", set())
