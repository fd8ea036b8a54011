# Answers to lesson 03's exercise 1 (03.wait_stream_fix), written the way learners write them.
# Each cell runs in a fresh process after the notebook's set-up; tests/answers.py says how.

# %% right: the side stream made once at top level, as the published solution
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: the same stream reused across two checks
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)
al.check("03.wait_stream_fix", on_side_stream)

# %% right: made lazily on the first call, kept in a global
side = None

def on_side_stream(work, x):
    global side
    if side is None:
        side = torch.cuda.Stream()
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)
al.check("03.wait_stream_fix", on_side_stream)

# %% right: a new stream per call
def on_side_stream(work, x):
    caller, side = torch.cuda.current_stream(), torch.cuda.Stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: events both ways instead of wait_stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    x_ready = torch.cuda.Event()
    x_ready.record(caller)
    side.wait_event(x_ready)
    with torch.cuda.stream(side):
        y = work(x)
        y_ready = torch.cuda.Event()
        y_ready.record()
    caller.wait_event(y_ready)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: record_event and Event.wait
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    caller.record_event().wait(side)
    with torch.cuda.stream(side):
        y = work(x)
    side.record_event().wait(caller)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: torch.cuda.set_stream by hand, and back
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    torch.cuda.set_stream(side)
    y = work(x)
    torch.cuda.set_stream(caller)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: StreamContext and the default stream named
side = torch.cuda.Stream()

def on_side_stream(work, x):
    main = torch.cuda.default_stream()
    side.wait_stream(main)
    with torch.cuda.StreamContext(side):
        y = work(x)
    main.wait_stream(side)
    y.record_stream(main)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: the device named, and the waits inside the block
def on_side_stream(work, x):
    dev = torch.cuda.current_device()
    caller = torch.cuda.current_stream(dev)
    side = torch.cuda.Stream(device=dev)
    with torch.cuda.device(dev), torch.cuda.stream(side):
        torch.cuda.current_stream().wait_stream(caller)
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: a high-priority side stream, the caller stream kept at top level
caller = torch.cuda.current_stream()
side = torch.cuda.Stream(priority=-1)

def on_side_stream(work, x):
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        out = work(x)
    caller.wait_stream(side)
    out.record_stream(caller)
    return out

al.check("03.wait_stream_fix", on_side_stream)

# %% right: record_stream before the wait back
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        y.record_stream(caller)
    caller.wait_stream(side)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "read x before its producer": the starter code, no waits
def on_side_stream(work, x):
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = work(x)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "read x before its producer": reuses a stream made once and drops the first wait
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)
al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "read x before its producer": a lazily made stream, first wait dropped, checked twice
side = None

def on_side_stream(work, x):
    global side
    side = side or torch.cuda.Stream()
    caller = torch.cuda.current_stream()
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)
al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "caller read the result before": only the input wait
side = torch.cuda.Stream()

def on_side_stream(work, x):
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = work(x)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "read x before its producer": the waits the wrong way round
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    caller.wait_stream(side)
    with torch.cuda.stream(side):
        y = work(x)
    side.wait_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "caller read the result before": the wait back issued before the work
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    caller.wait_stream(side)
    with torch.cuda.stream(side):
        y = work(x)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "caller read the result before": an event recorded on the side stream before the work
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        done = torch.cuda.Event()
        done.record()
        y = work(x)
    caller.wait_event(done)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "the host waited": synchronize before and after
side = torch.cuda.Stream()

def on_side_stream(work, x):
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        y = work(x)
    torch.cuda.synchronize()
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "the host waited": the side stream synchronized on the host
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    side.synchronize()
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "the host waited": an event synchronized instead of waited on
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        done = torch.cuda.Event()
        done.record()
    done.synchronize()
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "record_stream": both waits, no record_stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "record_stream": record_stream names the side stream, not the caller's
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(side)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "ran on the caller's stream": a side stream made but never used
side = torch.cuda.Stream()

def on_side_stream(work, x):
    side.wait_stream(torch.cuda.current_stream())
    y = work(x)
    torch.cuda.current_stream().wait_stream(side)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: asks for the GPU's name (the simulated GPU has one)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    assert torch.cuda.get_device_name()
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: computes on the result inside the function
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        y = y.add(0)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: a callable class that owns its side stream, events both ways
class SideRunner:
    def __init__(self):
        self.side = torch.cuda.Stream()

    def __call__(self, work, x):
        caller = torch.cuda.current_stream()
        x_ready = caller.record_event()
        self.side.wait_event(x_ready)
        with torch.cuda.stream(self.side):
            y = work(x)
            y_ready = torch.cuda.Event()
            y_ready.record()
        caller.wait_event(y_ready)
        y.record_stream(caller)
        return y

on_side_stream = SideRunner()
al.check("03.wait_stream_fix", on_side_stream)

# %% right: contextlib.ExitStack enters the side stream, the input wait given an event made inline
import contextlib

side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_event(caller.record_event())
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.cuda.stream(side))
        y = work(x)
    caller.wait_event(side.record_event())
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: the stream itself as the context manager, device taken from x
side = torch.cuda.Stream(device=torch.device("cuda", 0))

def on_side_stream(work, x):
    caller = torch.cuda.current_stream(x.device)
    side.wait_stream(caller)
    with side:
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: a stream made lazily, with one synchronize at creation only (before any race on a GPU: the check warms up first)
side = None

def on_side_stream(work, x):
    global side
    if side is None:
        side = torch.cuda.Stream()
        torch.cuda.synchronize()  # once, when the stream is made
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "ran on the caller's stream": set_stream(side) never put back (the caller's stream is the side stream from then on)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    torch.cuda.set_stream(side)
    y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "the host waited": printing the result to debug copies it to the host
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    print("result:", y)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "the host waited": a sleep "to let the side stream start" (the host waits, by the clock)
import time

side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    time.sleep(0.5)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "caller read the result before": the wait back on current_stream() inside the block (the side waits for itself)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        torch.cuda.current_stream().wait_stream(side)
        y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "record_stream": record_stream on the input x for the side stream, not on the result for the caller
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    x.record_stream(side)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "read x before its producer": an input event recorded once, at the top of the cell, long before x is made
side = torch.cuda.Stream()
x_ready = torch.cuda.Event()
x_ready.record()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_event(x_ready)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "ran on the caller's stream": gaming: replaces a checker harness that no longer exists
import asynclab.lessons.streams.exercises as ex
ex.harness = lambda *a, **k: ((lambda fn, late: (True, True, True, False)), "")

def on_side_stream(work, x):
    return work(x)

al.check("03.wait_stream_fix", on_side_stream)

# %% right: a generator context manager that forks onto the side stream and joins back
import contextlib

side = torch.cuda.Stream()

@contextlib.contextmanager
def forked(stream):
    caller = torch.cuda.current_stream()
    stream.wait_stream(caller)
    with torch.cuda.stream(stream):
        yield caller
    caller.wait_stream(stream)

def on_side_stream(work, x):
    with forked(side) as caller:
        y = work(x)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: functools.partial binds the side stream to a general helper
import functools

def run_on(stream, work, x):
    caller = torch.cuda.current_stream()
    stream.wait_stream(caller)
    with torch.cuda.stream(stream):
        y = work(x)
    caller.wait_stream(stream)
    y.record_stream(caller)
    return y

on_side_stream = functools.partial(run_on, torch.cuda.Stream())
al.check("03.wait_stream_fix", on_side_stream)

# %% right: one event object, made once, recorded and waited on in both directions
side = torch.cuda.Stream()
marker = torch.cuda.Event()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    marker.record(caller)
    side.wait_event(marker)
    with torch.cuda.stream(side):
        y = work(x)
    marker.record(side)
    caller.wait_event(marker)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: a closure factory that owns the stream
def make_on_side_stream():
    side = torch.cuda.Stream()

    def on_side_stream(work, x):
        caller = torch.cuda.current_stream()
        side.wait_stream(caller)
        with torch.cuda.stream(side):
            y = work(x)
        caller.wait_stream(side)
        y.record_stream(caller)
        return y

    return on_side_stream

on_side_stream = make_on_side_stream()
al.check("03.wait_stream_fix", on_side_stream)

# %% right: the stream and the caller's stream taken from x.device, inside torch.cuda.device(x.device)
streams = {}

def on_side_stream(work, x):
    with torch.cuda.device(x.device):
        side = streams.setdefault(x.device, torch.cuda.Stream(device=x.device))
        caller = torch.cuda.current_stream(x.device)
        side.wait_stream(caller)
        with torch.cuda.stream(side):
            y = work(x)
        caller.wait_stream(side)
        y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: record_stream on the input for the side stream as well as on the result for the caller
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    x.record_stream(side)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: interprocess events (no timing) for both waits
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    ready = torch.cuda.Event(interprocess=True)
    ready.record(caller)
    ready.wait(side)
    with torch.cuda.stream(side):
        y = work(x)
    done = torch.cuda.Event(interprocess=True)
    done.record(side)
    done.wait(caller)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: the work under torch.no_grad(), the stream made with the most urgent priority of priority_range()
low, high = torch.cuda.Stream.priority_range()
side = torch.cuda.Stream(priority=high)

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.no_grad(), torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: a short host sleep "to let the side stream start" (50 ms: less than the check's late work on a GPU)
import time

side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    time.sleep(0.05)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: a runner that keeps a detached view of its last result for logging (the memory is never freed, so never reused)
class SideRunner:
    def __init__(self):
        self.side = torch.cuda.Stream()
        self.last = None

    def __call__(self, work, x):
        caller = torch.cuda.current_stream()
        self.side.wait_stream(caller)
        with torch.cuda.stream(self.side):
            y = work(x)
        caller.wait_stream(self.side)
        self.last = y.detach()  # kept for logging
        return y

on_side_stream = SideRunner()
al.check("03.wait_stream_fix", on_side_stream)

# %% right: the caller's stream set by hand with set_stream and put back in a finally
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    torch.cuda.set_stream(side)
    try:
        y = work(x)
    finally:
        torch.cuda.set_stream(caller)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: the caller's stream from torch.accelerator.current_stream()
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.accelerator.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: asserts the result's shape
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    assert y.shape == x.shape
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% raises "'NoneType' object has no attribute 'wait_stream'": `with torch.cuda.stream(side) as s:` (the context gives None)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    with torch.cuda.stream(side) as s:
        s.wait_stream(caller)
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "not x itself": work(x)'s result dropped, x returned (as if work wrote x in place)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        work(x)
    caller.wait_stream(side)
    x.record_stream(caller)
    return x

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "ran on the caller's stream": torch.cuda.stream(side) called, not entered with `with`
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    torch.cuda.stream(side)
    y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "return work(x)'s result": a stray comma returns a tuple
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y,

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "read x before its producer": waits for the input only on the first call
side = torch.cuda.Stream()
first = [True]

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    if first[0]:
        side.wait_stream(caller)  # "the stream remembers"
        first[0] = False
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "read x before its producer": the input event recorded on the side stream itself
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    x_ready = torch.cuda.Event()
    with torch.cuda.stream(side):
        x_ready.record()  # on the side stream, not the caller's
        side.wait_event(x_ready)
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "caller read the result before": `caller` taken inside the block, so it is the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        caller = torch.cuda.current_stream()
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "caller read the result before": the caller's stream synchronized instead of waiting for the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.synchronize()
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "the host waited": polls the side stream until it is idle
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    while not side.query():
        pass
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "the host waited": torch.cuda.synchronize() for the input, wait_stream for the output
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    torch.cuda.synchronize()  # x is ready
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "record_stream": both waits done with events, record_stream forgotten, inside a class
class Runner:
    def __init__(self):
        self.side = torch.cuda.Stream()

    def __call__(self, work, x):
        caller = torch.cuda.current_stream()
        self.side.wait_event(caller.record_event())
        with torch.cuda.stream(self.side):
            y = work(x)
        caller.wait_event(self.side.record_event())
        return y

on_side_stream = Runner()
al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "read x before its producer": gaming: prints a right verdict over the starter code
def on_side_stream(work, x):
    print("Right: both races are closed and the result's memory is kept for the caller")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = work(x)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: keeps every result in a list, no record_stream (nothing is ever freed, so nothing is reused; the check cannot tell)
side = torch.cuda.Stream()
outputs = []

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    outputs.append(y)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: record_stream called through y.data
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.data.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns y.clone() made on the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x).clone()
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns y * 1 computed on the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        y = y * 1
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns y + 0 computed on the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        out = work(x) + 0
    caller.wait_stream(side)
    out.record_stream(caller)
    return out

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns y.reshape(-1).view_as(y), a view of work(x)'s result
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        flat = y.reshape(-1).view_as(y)
    caller.wait_stream(side)
    flat.record_stream(caller)
    return flat

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: y.nan_to_num() on the side stream, as a guard against bad values
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x).nan_to_num()
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: torch.where(torch.isfinite(y), y, 0) on the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        y = torch.where(torch.isfinite(y), y, 0)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: a side y.sum() computed on the side stream and discarded
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        total = y.sum()  # kept on the GPU, never read by the host
    caller.wait_stream(side)
    y.record_stream(caller)
    del total
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: y.norm() computed on the caller's stream after the join and discarded
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    _ = y.norm()  # a kernel on the caller's stream, after the wait; not read by the host
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns y.contiguous() (already contiguous: y itself)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x).contiguous()
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns y.float() (already float32: y itself)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x).float()
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns y.detach(), record_stream on the detached view
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x).detach()
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: a side y.abs().max() on the side stream, kept on the GPU and discarded
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        peak = y.abs().max()
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns torch.stack([y])[0] made on the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = torch.stack([work(x)])[0]
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns y.to(torch.float32) (same dtype: y itself)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x).to(torch.float32)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: a clone on the caller's stream after the join (y kept for the caller with record_stream first)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)  # the clone below reads y on the caller's stream
    out = y.clone()
    out.record_stream(caller)  # made on the caller's stream: harmless
    return out

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns torch.nn.functional.relu(y) computed on the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = torch.nn.functional.relu(work(x))
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns y.clamp(min=0) computed on the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x).clamp(min=0)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: the two halves of y joined again with torch.cat on the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        half = y.shape[0] // 2
        y = torch.cat([y[:half], y[half:]])
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: returns y.view(-1, 256).flatten() (a view of work(x)'s result)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x).view(-1, 256).flatten()
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: everyday op: y.mul_(1) in place on the side stream before the join
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        y.mul_(1)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% raises "object has no attribute 'record_event'": current_stream without its parentheses (a typo a GPU reports too)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    side.wait_stream(torch.cuda.current_stream)
    with torch.cuda.stream(side):
        y = work(x)
    torch.cuda.current_stream().wait_stream(side)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: record_event / wait_event both ways, one-liners, side made once
side = torch.cuda.Stream()

def on_side_stream(work, x):
    here = torch.cuda.current_stream()
    side.wait_event(here.record_event())
    with torch.cuda.stream(side):
        y = work(x)
    here.wait_event(side.record_event())
    y.record_stream(here)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong: the input wait is written inside the with block, so the side stream waits for itself
side = torch.cuda.Stream()

def on_side_stream(work, x):
    with torch.cuda.stream(side):
        side.wait_stream(torch.cuda.current_stream())
        y = work(x)
    torch.cuda.current_stream().wait_stream(side)
    y.record_stream(torch.cuda.current_stream())
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong: the caller's stream is looked up inside the with block (it is the side stream there)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    with torch.cuda.stream(side):
        caller = torch.cuda.current_stream()
        side.wait_stream(caller)
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong: record_stream given the side stream (where y was made) instead of the caller's
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(side)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: record_stream before the output wait (the order of the two does not matter)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
        y.record_stream(caller)
    caller.wait_stream(side)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong "host": the host waits for the side stream instead of the caller's stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    side.synchronize()
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: the work is launched from a worker thread that makes the side stream current there
import threading

side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    box = {}

    def job():
        with torch.cuda.stream(side):
            box["y"] = work(x)

    t = threading.Thread(target=job)
    t.start()
    t.join()
    caller.wait_stream(side)
    box["y"].record_stream(caller)
    return box["y"]

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong: worker thread without making the side stream current there (the work runs on the thread's default stream, unordered with nothing... but the waits go to an idle side stream)
import threading

side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    out = []
    t = threading.Thread(target=lambda: out.append(work(x)))
    torch.cuda.set_stream(side)
    try:
        t.start()
        t.join()
    finally:
        torch.cuda.set_stream(caller)
    caller.wait_stream(side)
    out[0].record_stream(caller)
    return out[0]

al.check("03.wait_stream_fix", on_side_stream)

# %% right: torch.cuda.set_stream and back, events made by hand
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    ready = torch.cuda.Event()
    ready.record(caller)
    side.wait_event(ready)
    torch.cuda.set_stream(side)
    try:
        y = work(x)
        done = torch.cuda.Event()
        done.record(side)
    finally:
        torch.cuda.set_stream(caller)
    caller.wait_event(done)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: the work under autocast(bfloat16) on the side stream, waits both ways
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side), torch.autocast("cuda", dtype=torch.bfloat16):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: the result converted to float32 on the side stream before the output wait
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x).float()
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong: waits both ways, no record_stream, y dropped by the function (the allocator reuses it on the side stream)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: no record_stream, but every result kept alive in a list (its memory is never reused)
side = torch.cuda.Stream()
kept = []

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    kept.append(y)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% wrong: the output wait is queued before the work (the caller waits for nothing)
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    caller.wait_stream(side)
    with torch.cuda.stream(side):
        y = work(x)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: the work on a half-precision copy of x, widened back to float32 on the side stream
side = torch.cuda.Stream()

def on_side_stream(work, x):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x.half()).float()
    caller.wait_stream(side)
    y.record_stream(caller)
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: the work under autocast(float16) on the side stream, waits both ways
def on_side_stream(work, x):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.autocast("cuda", dtype=torch.float16):
        y = work(x)
    torch.cuda.current_stream().wait_stream(side)
    y.record_stream(torch.cuda.current_stream())
    return y

al.check("03.wait_stream_fix", on_side_stream)

# %% right: TF32 allowed for the whole cell, the side stream waits both ways
torch.backends.cuda.matmul.allow_tf32 = True

def on_side_stream(work, x):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = work(x)
    torch.cuda.current_stream().wait_stream(side)
    y.record_stream(torch.cuda.current_stream())
    return y

al.check("03.wait_stream_fix", on_side_stream)
