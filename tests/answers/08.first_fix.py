# Answers to lesson 08's exercise 1 (08.first_fix), written the way learners write them.
# Each cell runs in a fresh process after the notebook's set-up; tests/answers.py says how.

# %% right: the first finding, as the solution
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, d.findings[0].lost_ms_per_step)

# %% right: the largest by lost_ms_per_step, with max()
d = al.diagnose(run.reference_trace("stage0"))
top = max(d.findings, key=lambda f: f.lost_ms_per_step)
al.check("08.first_fix", top.kind, top.lost_ms_per_step)

# %% right: from the table view
d = al.diagnose(run.reference_trace("stage0"))
row = d.table().sort_values("lost_ms_per_step", ascending=False).iloc[0]
al.check("08.first_fix", row["kind"], float(row["lost_ms_per_step"]))

# %% right: from the JSON view
import json

doc = json.loads(al.diagnose(run.reference_trace("stage0")).to_json())
f = doc["findings"][0]
al.check("08.first_fix", f["kind"], f["lost_ms_per_step"])

# %% right: share times the step time
d = al.diagnose(run.reference_trace("stage0"))
f = d.finding("dataloader_stall")
al.check("08.first_fix", "dataloader_stall", f.share * d.step_ms)

# %% right: read off the printed text, rounded to 0.1 ms
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", "dataloader_stall", round(d.findings[0].lost_ms_per_step, 1))

# %% right: from the stored results of the reference
stage0 = run.reference("fix_one_at_a_time")["stages"][0]["diagnosis"]
best = sorted(stage0["findings"], key=lambda f: -f["lost_ms_per_step"])[0]
al.check("08.first_fix", best["kind"], best["lost_ms_per_step"])

# %% right: the reference trace loaded from its file
from asynclab.diagnose import diagnose

d = diagnose(al.reference.lesson_dir(8) / "stage0.json.gz")
al.check("08.first_fix", d.findings[0].kind, d.findings[0].lost_ms_per_step)

# %% right: the kind named by the fix table, the saving from the finding
d = al.diagnose(run.reference_trace("stage0"))
kind = next(k for k in ex.FIX_OF_KIND if d.finding(k) is d.findings[0])
al.check("08.first_fix", kind, d.finding(kind).lost_ms_per_step)

# %% right: checked twice, the second time with numpy's float
import numpy as np

d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, d.findings[0].lost_ms_per_step)
al.check("08.first_fix", d.findings[0].kind, np.float64(d.findings[0].lost_ms_per_step))

# %% wrong "another finding loses more": the second finding
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[1].kind, d.findings[1].lost_ms_per_step)

# %% wrong "another finding loses more": the logging line, the one the course warns about most
al.check("08.first_fix", "host_sync", 1.0)

# %% wrong "the share of the step": the share instead of milliseconds
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, d.findings[0].share)

# %% wrong "seconds": the saving in seconds
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, d.findings[0].lost_ms_per_step / 1000)

# %% wrong "the whole step": the step time
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, d.step_ms)

# %% wrong "all the idle time": the idle time
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, d.idle_ms_per_step)

# %% wrong "a string": the Finding itself
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0], d.findings[0].lost_ms_per_step)

# %% wrong "not a finding kind": the fix's name instead of the kind
al.check("08.first_fix", "workers", 53.0)

# %% wrong "found no": a kind this diagnosis does not name
al.check("08.first_fix", "exposed_comm", 10.0)

# %% wrong "a number of milliseconds": the saving as text
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, f"{d.findings[0].lost_ms_per_step:.1f} ms")

# %% wrong "not what the diagnosis says": the measured saving of section 3, not the diagnosis's
stages = run.reference("fix_one_at_a_time")["stages"]
al.check("08.first_fix", "dataloader_stall", 2 * stages[0]["step_ms"] - stages[1]["step_ms"])

# %% right: sorted() on lost_ms_per_step, numpy float32 saving
import numpy as np

d = al.diagnose(run.reference_trace("stage0"))
best = sorted(d.findings, key=lambda f: -f.lost_ms_per_step)[0]
al.check("08.first_fix", best.kind, np.float32(best.lost_ms_per_step))

# %% right: rounded to whole milliseconds, as read off the printed diagnosis
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, round(d.findings[0].lost_ms_per_step))

# %% wrong: the kind right, the saving NaN
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, float("nan"))

# %% wrong: the kind right, the saving infinite
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, float("inf"))

# %% wrong: the kind right, the saving as a string
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, f"{d.findings[0].lost_ms_per_step:.1f}")

# %% wrong: the kind as None, the saving right
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", None, d.findings[0].lost_ms_per_step)

# %% wrong: the kind capitalised
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", "DataLoader_stall", d.findings[0].lost_ms_per_step)

# %% wrong: the share of the step given as the saving
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, d.findings[0].share)

# %% wrong: the finding that the text calls out (host_sync), with its own saving
d = al.diagnose(run.reference_trace("stage0"))
f = d.finding("host_sync")
al.check("08.first_fix", f.kind, f.lost_ms_per_step)

# %% wrong: the whole step time as the saving
d = al.diagnose(run.reference_trace("stage0"))
al.check("08.first_fix", d.findings[0].kind, d.step_ms)
