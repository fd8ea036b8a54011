# Learner answers to lesson 02's exercise 1 (02.event_timer): my_time_ms(fn) returns one call's GPU time in ms.
# Each cell is run after the notebook's set-up (torch, al and time imported); see tests/answers.py for the format.

# %% right: events made once at the top of the cell, end.synchronize() before elapsed_time
start = torch.cuda.Event(enable_timing=True)
end = torch.cuda.Event(enable_timing=True)

def my_time_ms(fn):
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: events made lazily on the first call, kept in a global
_events = None

def my_time_ms(fn):
    global _events
    if _events is None:
        _events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    start, end = _events
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: torch.cuda.synchronize() on both sides of a wall clock
def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: time.perf_counter_ns, divided down to ms
def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / 1e6

al.check("02.event_timer", my_time_ms)

# %% right: waits on the current stream, not the whole device
def my_time_ms(fn):
    stream = torch.cuda.current_stream()
    stream.synchronize()
    t0 = time.perf_counter()
    fn()
    stream.synchronize()
    return 1000 * (time.perf_counter() - t0)

al.check("02.event_timer", my_time_ms)

# %% right: events, with torch.cuda.synchronize() instead of end.synchronize()
def my_time_ms(fn):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: blocking events (the host sleeps instead of spinning in end.synchronize())
def my_time_ms(fn):
    start = torch.cuda.Event(enable_timing=True, blocking=True)
    end = torch.cuda.Event(enable_timing=True, blocking=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: events recorded on an explicitly named stream
def my_time_ms(fn):
    stream = torch.cuda.current_stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    fn()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: a side stream made once, work and events on it with torch.cuda.stream(s); checked twice
side = torch.cuda.Stream()

def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(side):
        start.record()
        fn()
        end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)
al.check("02.event_timer", my_time_ms)

# %% right: torch.cuda.set_stream to a new stream, then back, and that stream's synchronize()
def my_time_ms(fn):
    before = torch.cuda.current_stream()
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    try:
        t0 = time.perf_counter()
        fn()
        stream.synchronize()
        elapsed = time.perf_counter() - t0
    finally:
        torch.cuda.set_stream(before)
    return elapsed * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: events recorded through torch.cuda.default_stream().record_event
def my_time_ms(fn):
    stream = torch.cuda.default_stream()
    start = stream.record_event(torch.cuda.Event(enable_timing=True))
    fn()
    end = stream.record_event(torch.cuda.Event(enable_timing=True))
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: times several calls between two events and divides
def my_time_ms(fn, repeats=5):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats

al.check("02.event_timer", my_time_ms)

# %% right: a warm-up call, waited for, then the timed call
def my_time_ms(fn):
    fn()  # warm-up
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: a warm-up call not waited for: the start event waits for it in the stream
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()  # warm-up, still running when start is recorded
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: the median of three event timings
import statistics

def my_time_ms(fn):
    times = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)

al.check("02.event_timer", my_time_ms)

# %% right: polls end.query() until the GPU reaches the end event
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    while not end.query():
        pass
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: an event without timing, used only to wait, and time.monotonic
def my_time_ms(fn):
    done = torch.cuda.Event()
    torch.cuda.synchronize()
    t0 = time.monotonic()
    fn()
    done.record()
    done.synchronize()
    return (time.monotonic() - t0) * 1000

al.check("02.event_timer", my_time_ms)

# %% right: a CPU fallback as in the solution, time.time() on the CPU, events on the GPU; checked twice
start_event = torch.cuda.Event(enable_timing=True)
end_event = torch.cuda.Event(enable_timing=True)

def my_time_ms(fn):
    if not torch.cuda.is_available():
        t0 = time.time()
        fn()
        return (time.time() - t0) * 1000
    start_event.record()
    fn()
    end_event.record()
    end_event.synchronize()
    return start_event.elapsed_time(end_event)

al.check("02.event_timer", my_time_ms)
al.check("02.event_timer", my_time_ms)

# %% right: events inside an NVTX range, to find the timing on a profiler trace
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.nvtx.range_push("my_time_ms")
    start.record()
    fn()
    end.record()
    torch.cuda.nvtx.range_pop()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: the device-generic torch.Event
def my_time_ms(fn):
    start = torch.Event(device="cuda", enable_timing=True)
    end = torch.Event(device="cuda", enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: torch.accelerator.synchronize() around a wall clock
def my_time_ms(fn):
    torch.accelerator.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.accelerator.synchronize()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)


# %% wrong "timed the launch": torch.accelerator.synchronize() only before the call
def my_time_ms(fn):
    torch.accelerator.synchronize()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: torch.utils.benchmark, which synchronizes for you (imported inside the function)
def my_time_ms(fn):
    from torch.utils import benchmark

    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn})
    return timer.blocked_autorange(min_run_time=0.2).median * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": the starter's wall clock, no synchronize
def my_time_ms(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": reads the clock, then waits
def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": synchronizes only before the call
def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "looks like seconds": elapsed_time divided by 1000
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000

al.check("02.event_timer", my_time_ms)

# %% wrong "looks like seconds": a synchronized wall clock left in seconds
def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0

al.check("02.event_timer", my_time_ms)

# %% wrong "check the units": elapsed_time taken for seconds and multiplied by 1000 (µs)
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000

al.check("02.event_timer", my_time_ms)

# %% wrong "check the units": perf_counter_ns divided by 1e3 gives µs
def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": both events recorded before the call
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    end.record()
    fn()
    torch.cuda.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": the start event recorded after the call
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    start.record()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": waits on the start event instead of the end event
def my_time_ms(fn):
    start = torch.cuda.Event()
    start.record()
    t0 = time.perf_counter()
    fn()
    start.synchronize()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": events on the default stream, the work on a side stream
side = torch.cuda.Stream()

def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    with torch.cuda.stream(side):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% wrong "time the work itself": a warm-up call not waited for, then a wall clock
def my_time_ms(fn):
    fn()  # warm-up
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "time the work itself": two calls between the events, not divided
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% wrong "time the work itself": five calls divided by ten
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 10

al.check("02.event_timer", my_time_ms)

# %% wrong "as a number": returns a formatted string
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return f"{start.elapsed_time(end):.2f} ms"

al.check("02.event_timer", my_time_ms)

# %% wrong "as a number": returns a tensor
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return torch.tensor(start.elapsed_time(end))

al.check("02.event_timer", my_time_ms)

# %% right: a context-manager class around two timing events
class CudaTimer:
    def __enter__(self):
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.start.record()
        return self

    def __exit__(self, *exc):
        self.end.record()
        self.end.synchronize()
        self.ms = self.start.elapsed_time(self.end)

def my_time_ms(fn):
    with CudaTimer() as t:
        fn()
    return t.ms

al.check("02.event_timer", my_time_ms)

# %% right: the events recorded with stream= keywords on the stream captured first
def my_time_ms(fn):
    stream = torch.cuda.current_stream()
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record(stream=stream)
    fn()
    end.record(stream=stream)
    stream.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: the host synchronizes before the end event is recorded (the end is late by a launch, not more)
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    torch.cuda.synchronize()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: the work on a side stream that first waits for the current one, events on the side stream
def my_time_ms(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(side):
        start.record()
        fn()
        end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: a wall clock that polls the stream with short sleeps until it is idle
import time

def my_time_ms(fn):
    t0 = time.perf_counter()
    fn()
    while not torch.cuda.current_stream().query():
        time.sleep(1e-4)
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: CPU time (time.process_time) around a synchronize: the host spins in cudaDeviceSynchronize on a GPU
import time

def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.process_time()
    fn()
    torch.cuda.synchronize()
    return (time.process_time() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% raises "CUDA error: invalid argument": interprocess timing events (CUDA refuses interprocess events that time)
def my_time_ms(fn):
    start = torch.cuda.Event(enable_timing=True, interprocess=True)
    end = torch.cuda.Event(enable_timing=True, interprocess=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% raises "Both events must be created with argument 'enable_timing=True'": events made by record_event() have no timing
def my_time_ms(fn):
    stream = torch.cuda.current_stream()
    start = stream.record_event()
    fn()
    end = stream.record_event()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": a wall clock that asks query() once, and does not wait when it says no
import time

def my_time_ms(fn):
    t0 = time.perf_counter()
    fn()
    done = torch.cuda.current_stream().query()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% raises "Both events must be completed before calculating elapsed time": elapsed_time read right after end.wait() (a stream wait, not a host wait)
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.wait()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% wrong "check the units": gaming: returns the workload's length read from fn's closure (cycles on a GPU)
def my_time_ms(fn):
    cells = [c.cell_contents for c in (fn.__closure__ or ())]
    return next(v for v in cells if isinstance(v, (int, float)) and not isinstance(v, bool))

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": gaming: prints a "Right:" line, times the launch
import time

def my_time_ms(fn):
    t0 = time.perf_counter()
    fn()
    print("Right: 20.00 ms for a 20 ms GPU workload")
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: a wall clock with one synchronize after the call (the check hands over an idle GPU)
def my_time_ms(fn):
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: events, and a host sleep long enough for the GPU to get past the end event
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    time.sleep(0.2)  # "give the GPU time to finish"
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: the start event recorded on an idle side stream, the work and the end on the current stream
side = torch.cuda.Stream()

def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(side)
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: functools.partial of a generic timer, with torch.cuda.synchronize bound as its sync and time.perf_counter bound before the check
import functools

def timed(fn, clock, sync):
    sync()
    t0 = clock()
    fn()
    sync()
    return (clock() - t0) * 1e3

my_time_ms = functools.partial(timed, clock=time.perf_counter, sync=torch.cuda.synchronize)
al.check("02.event_timer", my_time_ms)

# %% right: a lambda over two events made at the top of the cell
start_ev, end_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
my_time_ms = lambda fn: (start_ev.record(), fn(), end_ev.record(), end_ev.synchronize(), start_ev.elapsed_time(end_ev))[-1]
al.check("02.event_timer", my_time_ms)

# %% right: a generator-based context manager that yields a result dict
import contextlib

@contextlib.contextmanager
def cuda_timer():
    result = {}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    yield result
    end.record()
    end.synchronize()
    result["ms"] = start.elapsed_time(end)

def my_time_ms(fn):
    with cuda_timer() as r:
        fn()
    return r["ms"]

al.check("02.event_timer", my_time_ms)

# %% right: the work on a high-priority side stream with waits both ways, events on the caller's stream
fast = torch.cuda.Stream(priority=-1)

def my_time_ms(fn):
    main = torch.cuda.current_stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(main)
    fast.wait_stream(main)
    with torch.cuda.stream(fast):
        fn()
    main.wait_stream(fast)
    end.record(main)
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: the most urgent priority from torch.cuda.Stream.priority_range(), work and events on that stream
low, high = torch.cuda.Stream.priority_range()
urgent = torch.cuda.Stream(priority=high)

def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(urgent):
        start.record()
        fn()
        end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: inside torch.cuda.device(0), synchronize(0) on both sides, time.time
def my_time_ms(fn):
    with torch.cuda.device(0):
        torch.cuda.synchronize(0)
        t0 = time.time()
        fn()
        torch.cuda.synchronize(0)
        return (time.time() - t0) * 1000.0

al.check("02.event_timer", my_time_ms)

# %% right: synchronize given a torch.device, timeit's default_timer
import timeit

def my_time_ms(fn):
    dev = torch.device("cuda", 0)
    torch.cuda.synchronize(dev)
    t0 = timeit.default_timer()
    fn()
    torch.cuda.synchronize(dev)
    return (timeit.default_timer() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: polls the end event with short sleeps
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    while not end.query():
        time.sleep(1e-3)
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: integer milliseconds from time.time_ns()
def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.time_ns()
    fn()
    torch.cuda.synchronize()
    return (time.time_ns() - t0) // 1_000_000

al.check("02.event_timer", my_time_ms)

# %% right: the stream waits for the end event, then the host waits for the stream
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    stream = torch.cuda.current_stream()
    stream.wait_event(end)
    stream.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: gaming: replaces the checker's workload runner (passes on a GPU too)
import asynclab.lessons.timing.exercises as timing_ex

timing_ex._time_workload = lambda backend, timer, ms: (ms, True, False)

def my_time_ms(fn):
    return 0.0

al.check("02.event_timer", my_time_ms)

# %% right: gaming: knows the check's three workloads, synchronizes so the GPU is done, returns 20/40/80
calls = [0]

def my_time_ms(fn):
    fn()
    torch.cuda.synchronize()
    calls[0] += 1
    return 20.0 * 2 ** ((calls[0] - 1) % 3)

al.check("02.event_timer", my_time_ms)

# %% right: the device-generic torch.Event with no device named
def my_time_ms(fn):
    start, end = torch.Event(enable_timing=True), torch.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: torch.accelerator.current_stream().synchronize() around a wall clock
def my_time_ms(fn):
    stream = torch.accelerator.current_stream()
    stream.synchronize()
    t0 = time.perf_counter()
    fn()
    stream.synchronize()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": CPU time around a blocking event's wait (the host sleeps in it, using no CPU time)
def my_time_ms(fn):
    done = torch.cuda.Event(blocking=True)
    torch.cuda.synchronize()
    t0 = time.process_time()
    fn()
    done.record()
    done.synchronize()
    return (time.process_time() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": CPU time around a poll that sleeps
def my_time_ms(fn):
    t0 = time.process_time()
    fn()
    while not torch.cuda.current_stream().query():
        time.sleep(1e-3)
    return (time.process_time() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong: elapsed_time asked the wrong way round (end to start: negative)
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return end.elapsed_time(start)

al.check("02.event_timer", my_time_ms)

# %% raises "Both events must be completed before calculating elapsed time": elapsed_time read before end.synchronize()
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    ms = start.elapsed_time(end)
    end.synchronize()
    return ms

al.check("02.event_timer", my_time_ms)

# %% raises "Both events must be created with argument 'enable_timing=True'": timing enabled on the start event only
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% raises "Both events must be completed before calculating elapsed time": a host sleep too short for the 80 ms workload
def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    time.sleep(0.05)
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": the work on a side stream, the current stream synchronized
side = torch.cuda.Stream()

def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().synchronize()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": both events on a side stream, the work on the current stream
side = torch.cuda.Stream()

def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(side)
    fn()
    end.record(side)
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": waits for the stream before the call, not after
def my_time_ms(fn):
    while not torch.cuda.current_stream().query():
        pass
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "as a number": returns numpy's float32
import numpy as np

def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return np.float32(start.elapsed_time(end))

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": gaming: returns 20/40/80 from a call counter, never waits
calls = [0]

def my_time_ms(fn):
    fn()
    calls[0] += 1
    return 20.0 * 2 ** ((calls[0] - 1) % 3)

al.check("02.event_timer", my_time_ms)


# %% right: reports the peak memory too, with torch.cuda's memory statistics
def my_time_ms(fn):
    torch.cuda.reset_peak_memory_stats()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    print(f"peak memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": perf_counter imported by name at the top, no synchronize
from time import perf_counter

def my_time_ms(fn):
    t0 = perf_counter()
    fn()
    return (perf_counter() - t0) * 1000

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": timeit.timeit of fn, once, no synchronize
import timeit

def my_time_ms(fn):
    return timeit.timeit(fn, number=1) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": time.monotonic bound as a default argument, no synchronize
def my_time_ms(fn, now=time.monotonic):
    t = now()
    fn()
    return 1000 * (now() - t)

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": from time import *, monotonic_ns, no synchronize
from time import *

def my_time_ms(fn):
    t0 = monotonic_ns()
    fn()
    return (monotonic_ns() - t0) / 1e6

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": datetime.now() around the call, no synchronize
from datetime import datetime

def my_time_ms(fn):
    t0 = datetime.now()
    fn()
    return (datetime.now() - t0) / __import__("datetime").timedelta(milliseconds=1)

al.check("02.event_timer", my_time_ms)

# %% right: thread CPU time around a synchronize (the calling thread spins in cudaDeviceSynchronize)
def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.thread_time()
    fn()
    torch.cuda.synchronize()
    return (time.thread_time() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: fn runs in a threading.Thread, joined before the end event is recorded
import threading

def my_time_ms(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    worker = threading.Thread(target=fn)
    worker.start()
    worker.join()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% right: fn submitted to a ThreadPoolExecutor, result() awaited, synchronized wall clock
from concurrent.futures import ThreadPoolExecutor

pool = ThreadPoolExecutor(max_workers=1)

def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    pool.submit(fn).result()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: a helper thread blocks in end.synchronize(); the caller joins it
import threading

def my_time_ms(fn):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    waiter = threading.Thread(target=e.synchronize, daemon=True)
    waiter.start()
    waiter.join()
    return s.elapsed_time(e)

al.check("02.event_timer", my_time_ms)

# %% right: returns a numpy float64 (a subclass of Python's float)
import numpy as np

def my_time_ms(fn):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(); e.record(); e.synchronize()
    return np.float64(s.elapsed_time(e))

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": the .cpu() meant as a wait is written before fn() instead of after it
from time import perf_counter as pc

def my_time_ms(fn):
    flag = torch.zeros((), device="cuda")
    t0 = pc()
    flag.cpu()
    fn()
    return (pc() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: a lambda default argument that looks time.perf_counter up at call time, synchronized
def my_time_ms(fn, now=lambda: time.perf_counter()):
    torch.cuda.synchronize()
    t0 = now()
    fn()
    torch.cuda.synchronize()
    return (now() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: getattr(time, "perf_counter") at call time, synchronized
def my_time_ms(fn, clock_name="perf_counter"):
    clock = getattr(time, clock_name)
    torch.cuda.synchronize()
    t0 = clock()
    fn()
    torch.cuda.synchronize()
    return (clock() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": CPU time (process_time) around the call, no wait
def my_time_ms(fn):
    t0 = time.process_time()
    fn()
    return (time.process_time() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": timeit.Timer(fn).timeit(1), no synchronize
import timeit

def my_time_ms(fn):
    return timeit.Timer(fn).timeit(number=1) * 1000

al.check("02.event_timer", my_time_ms)

# %% right: perf_counter imported by name at the top of the cell, synchronize on both sides
from time import perf_counter

def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = perf_counter()
    fn()
    torch.cuda.synchronize()
    return (perf_counter() - t0) * 1000

al.check("02.event_timer", my_time_ms)

# %% right: timeit.timeit with a synchronize in the setup and in the statement
import timeit

def my_time_ms(fn):
    def once():
        fn()
        torch.cuda.synchronize()
    return timeit.timeit(once, setup=torch.cuda.synchronize, number=1) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: timeit.repeat, three repeats of one synchronized call, the minimum
import timeit

def my_time_ms(fn):
    torch.cuda.synchronize()
    runs = timeit.repeat(lambda: (fn(), torch.cuda.synchronize()), repeat=3, number=1)
    return min(runs) * 1000.0

al.check("02.event_timer", my_time_ms)

# %% right: time.monotonic bound as a default argument, the device synchronized first and last
def my_time_ms(fn, now=time.monotonic, sync=torch.cuda.synchronize):
    sync()
    t = now()
    fn()
    sync()
    return 1000 * (now() - t)

al.check("02.event_timer", my_time_ms)

# %% right: a clock made with functools.partial at the top, synchronize looked up at call time
import functools

clock = functools.partial(time.perf_counter)

def my_time_ms(fn):
    torch.cuda.synchronize()
    a = clock()
    fn()
    torch.cuda.synchronize()
    b = clock()
    return (b - a) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: timeit's default_timer imported as timer at the top, stream synchronize
from timeit import default_timer as timer

def my_time_ms(fn):
    s = torch.cuda.current_stream()
    s.synchronize()
    t0 = timer()
    fn()
    s.synchronize()
    return (timer() - t0) * 1000

al.check("02.event_timer", my_time_ms)

# %% limit: datetime.now() around a synchronized call (datetime reads the system's clock in C: the simulation cannot move it)
import datetime

def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = datetime.datetime.now()
    fn()
    torch.cuda.synchronize()
    return (datetime.datetime.now() - t0).total_seconds() * 1000

al.check("02.event_timer", my_time_ms)

# %% right: clock_gettime(CLOCK_MONOTONIC) around a synchronized call
def my_time_ms(fn):
    torch.cuda.synchronize()
    t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
    fn()
    torch.cuda.synchronize()
    return (time.clock_gettime(time.CLOCK_MONOTONIC) - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: waits with .item() on a tiny tensor queued after the work, perf_counter bound at the top
from time import perf_counter as pc

def my_time_ms(fn):
    flag = torch.zeros((), device="cuda")
    flag.item()
    t0 = pc()
    fn()
    (flag + 1).item()
    return (pc() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: a stopwatch class whose clock is a class attribute (bound when the class is made), synchronized
class Stopwatch:
    clock = time.perf_counter

    def __enter__(self):
        torch.cuda.synchronize()
        self.t0 = self.clock()
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        self.ms = (self.clock() - self.t0) * 1e3

def my_time_ms(fn):
    with Stopwatch() as sw:
        fn()
    return sw.ms

al.check("02.event_timer", my_time_ms)

# %% right: torch.utils.benchmark imported at the top, blocked_autorange's median
from torch.utils import benchmark

def my_time_ms(fn):
    m = benchmark.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=0.2)
    return m.median * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: asyncio.run, fn() then await asyncio.to_thread(torch.cuda.synchronize), wall clock around it
import asyncio

def my_time_ms(fn):
    async def timed():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        await asyncio.to_thread(torch.cuda.synchronize)
        return (time.perf_counter() - t0) * 1e3
    return asyncio.run(timed())

al.check("02.event_timer", my_time_ms)

# %% right: loop.run_in_executor(None, ...) waits on end.synchronize() of two CUDA events
import asyncio

def my_time_ms(fn):
    async def timed():
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, end.synchronize)
        return start.elapsed_time(end)
    return asyncio.run(timed())

al.check("02.event_timer", my_time_ms)

# %% right: asyncio Future set from a worker thread with loop.call_soon_threadsafe after it synchronizes
import asyncio
import threading

def my_time_ms(fn):
    async def timed():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        def waiter():
            torch.cuda.synchronize()
            loop.call_soon_threadsafe(fut.set_result, time.perf_counter())
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        threading.Thread(target=waiter).start()
        t1 = await fut
        return (t1 - t0) * 1e3
    return asyncio.run(timed())

al.check("02.event_timer", my_time_ms)

# %% right: ThreadPoolExecutor runs fn() and synchronizes, concurrent.futures.wait on the future
import concurrent.futures

def my_time_ms(fn):
    def work():
        fn()
        torch.cuda.synchronize()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        concurrent.futures.wait([pool.submit(work)])
        return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: ThreadPoolExecutor worker times fn() with events, result read through as_completed
import concurrent.futures

def time_with_events(fn):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)

def my_time_ms(fn):
    with concurrent.futures.ThreadPoolExecutor() as pool:
        futures = [pool.submit(time_with_events, fn)]
        for f in concurrent.futures.as_completed(futures):
            return f.result()

al.check("02.event_timer", my_time_ms)

# %% right: worker thread runs fn() and torch.cuda.synchronize(), puts the elapsed ms on a queue.Queue
import queue
import threading

def my_time_ms(fn):
    q = queue.Queue()
    def worker():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        q.put((time.perf_counter() - t0) * 1e3)
    threading.Thread(target=worker).start()
    return q.get()

al.check("02.event_timer", my_time_ms)

# %% right: worker thread synchronizes then puts a token on a queue.SimpleQueue, main thread get()s it
import queue
import threading

def my_time_ms(fn):
    done = queue.SimpleQueue()
    def worker():
        fn()
        torch.cuda.synchronize()
        done.put(True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    threading.Thread(target=worker).start()
    done.get()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: worker sets a list-element flag after synchronizing, main thread polls it with time.sleep(0.001)
import threading

def my_time_ms(fn):
    flag = [False]
    def worker():
        torch.cuda.synchronize()
        flag[0] = True
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    threading.Thread(target=worker).start()
    while not flag[0]:
        time.sleep(0.001)
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% right: threading.Event set by a worker after end.synchronize(), ev.wait() in main before elapsed_time
import threading

def my_time_ms(fn):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    ev = threading.Event()
    def worker():
        end.synchronize()
        ev.set()
    start.record()
    fn()
    end.record()
    threading.Thread(target=worker).start()
    ev.wait()
    return start.elapsed_time(end)

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": worker thread only calls fn() before queue.Queue().put, no synchronize
import queue
import threading

def my_time_ms(fn):
    q = queue.Queue()
    def worker():
        fn()
        q.put("done")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    threading.Thread(target=worker).start()
    q.get()
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong "timed the launch": global flag set by the worker right after fn(), main polls it, GPU never waited for
import threading

done = False

def my_time_ms(fn):
    global done
    done = False
    def worker():
        global done
        fn()
        done = True
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    threading.Thread(target=worker).start()
    while not done:
        time.sleep(0.001)
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)

# %% wrong: worker synchronizes before setting the flag, but main polls it every 50 ms, so the time overshoots
import threading

def my_time_ms(fn):
    flag = [False]
    def worker():
        fn()
        torch.cuda.synchronize()
        flag[0] = True
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    threading.Thread(target=worker).start()
    while not flag[0]:
        time.sleep(0.05)
    return (time.perf_counter() - t0) * 1e3

al.check("02.event_timer", my_time_ms)
