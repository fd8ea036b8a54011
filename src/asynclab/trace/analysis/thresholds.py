"""The trace analysis' numeric thresholds, in one place: the lengths, sizes, shares and factors that decide what the
analysis calls held, tiny, many, steady, an outlier or worth reporting. Each is read where it is used (and named
there too, for the modules' readers and their API)."""
from __future__ import annotations

# Steps and the steady part of a trace (metrics, the timeline)
#: A whole-trace picture zooms on the profiler's steps when they leave out at least this share of the trace's span.
STEADY_MIN_LEFT_OUT = 0.1

# The replay of a step (replay)
#: Between queued kernels the GPU idles a few µs: a task that started this soon after another was held by it (µs).
GPU_GAP_US = 5.0
#: The most a launch takes to reach an idle GPU (µs); see :func:`asynclab.trace.analysis.replay.launch_latency`.
LAUNCH_LATENCY_US = 20.0
#: A GPU task that started this long after its other bounds waited for something else on the GPU (µs).
HELD_US = 10.0

# The causes of idle time (idle)
#: A host-to-device copy this small is "tiny"; this many of them per step are "many" (small_copies).
SMALL_COPY_BYTES = 64 * 1024
MANY_SMALL_COPIES = 8
#: A host call that returned at most this long after the GPU ran dry was waiting for it (µs).
WAKE_US = 60.0
#: The GPU waited for the launches only in stretches up to this many times the host's time per launch; a longer
#: wait is the host doing something else (named by the op it was in, or unexplained).
LAUNCH_STRETCH_FACTOR = 4.0
#: Kernels shorter than this are too short for an under-filled grid to matter (µs).
UNDERFILL_MIN_US = 5.0

# Predicted savings (savings)
#: A step whose host time is more than this many times the median of the others' is an outlier.
OUTLIER_FACTOR = 2.0
#: A runtime call this long (µs) before a trace's first GPU work is CUDA start-up (context, first cudaFree).
STARTUP_US = 10_000.0
#: The share of a segment by which its first work must move for the steady replay to replay it again (less changes the
#: step by less than that share, which the prediction's accuracy does not resolve).
STEADY_RESOLUTION = 1e-3
#: A fix that saves less than this share of the step saves nothing: the diagnosis does not report it, and the step
#: with every fix leaves it out.
MIN_SHARE = 1e-4

# The fixes replayed (whatif)
#: Host-to-device rate of pinned memory when the trace has no large pinned copy to measure it from (bytes/µs:
#: 25 GB/s, PCIe 4.0 x16 in practice).
PINNED_BYTES_PER_US = 25e3
#: The same over PCIe 5.0 x16, the link of a GPU of compute capability 9 or later (an H100 moved 53.7 GB/s from pinned
#: memory in lesson 05's reference, and 53.8 GB/s when scripts/calibrate_gpu.py measured it).
PCIE5_PINNED_BYTES_PER_US = 53.7e3
#: How many times its even share of the memory's bandwidth an SM draws while few are busy: 2.22 on an H100, where a
#: softmax over 8 long rows (a block a row) took 8.0 times as long as one over 132 rows of the same elements
#: (scripts/calibrate_gpu.py, two runs: 2.21 and 2.23; the simulated H100's ``sm_draw``).
SM_DRAW = 2.22
#: What a kernel's launch costs the host inside a CUDA graph's replay (µs).
GRAPH_LAUNCH_US = 0.5
#: A Python call this long (µs) that launches nothing is the host's own work, which a CUDA graph does not replace.
OWN_WORK_MIN_US = 50.0
#: A fix that another needs first is counted (and listed) before it from this share of the step on.
FIRST_SHARE = 0.1

# The diagnosis (diagnose, the timeline's findings strip)
#: The text view folds findings under this share of the step into one line; the timeline's findings strip draws none
#: of them.
FOLD_SHARE = 0.02
#: The GPU sets the pace where it takes this many times the host's time from each step to the next, or more (the
#: GPU's step ranges start a launch's latency after the host's, give or take a few µs).
PACE = 1.1
