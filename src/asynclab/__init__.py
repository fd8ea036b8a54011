"""asynclab: see what the GPU really did. Helpers for the course notebooks and for any torch.profiler trace."""
from asynclab import hardware, lessons, timing
from asynclab.checks import check, claim
from asynclab.course import save_figure
from asynclab.hardware import inventory, report
from asynclab.lessons import lesson_map, start
from asynclab.timing import benchmark_timer, compare, event_timer, fmt_ms, naive_timer, sync_timer

__version__ = "0.1.0"
