"""asynclab: see what the GPU really did. Helpers for the course notebooks and for any torch.profiler trace."""
from asynclab import hardware, lessons, metrics, reference, timing
from asynclab.checks import check, claim
from asynclab.course import save_figure
from asynclab.hardware import inventory, report
from asynclab.lessons import lesson_map, start
from asynclab.parallel import Parallel
from asynclab.metrics import (
    bubble_fraction, busy_time, concurrency, concurrent_time, hidden_fraction, host_lead, idle_gaps, launch_latency, overlap,
    stream_waits, summary, top_kernels,
)
from asynclab.record import record
from asynclab.timeline import Timeline, draw_timeline
from asynclab.timing import benchmark_timer, compare, event_timer, fmt_ms, naive_timer, sync_timer
from asynclab.trace import Trace, TraceError, load_trace

__version__ = "0.1.0"
