# Learner answers to lesson 05's exercise 2, "Find the missing synchronization" (al.check("05.d2h_read", read_losses)),
# each cell as typed after the notebook's set-up; run by tests/answers.py, verdicts checked by tests/grading/test_answers.py.

# %% right: the published fix: an event recorded after the copy, synchronized on
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    copied.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: an event made once at top level, reused across two checks
copied = torch.cuda.Event()

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    copied.record()
    copied.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)
al.check("05.d2h_read", read_losses)

# %% right: an event made lazily on the first call, kept in a global, checked twice
_copied = None

def read_losses(losses, out):
    global _copied
    if _copied is None:
        _copied = torch.cuda.Event(blocking=True)
    out.copy_(losses, non_blocking=True)
    _copied.record(torch.cuda.current_stream())
    _copied.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)
al.check("05.d2h_read", read_losses)

# %% right: torch.cuda.synchronize() before reading
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: torch.cuda.current_stream().synchronize()
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.current_stream().synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: current_stream().record_event(), then the host polls it until the copy is done
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    e = torch.cuda.current_stream().record_event()
    while not e.query():
        pass
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: a blocking copy: losses.to("cpu")
def read_losses(losses, out):
    return losses.to("cpu").tolist()

al.check("05.d2h_read", read_losses)

# %% right: losses.cpu().tolist(), out left alone
def read_losses(losses, out):
    return losses.cpu().tolist()

al.check("05.d2h_read", read_losses)

# %% right: losses.tolist() reads from the GPU, and waits
def read_losses(losses, out):
    return losses.tolist()

al.check("05.d2h_read", read_losses)

# %% right: copy_ without non_blocking (the host waits for the copy)
def read_losses(losses, out):
    out.copy_(losses)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: [float(v) for v in out] after a synchronize on the default stream
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.default_stream().synchronize()
    return [float(v) for v in out]

al.check("05.d2h_read", read_losses)

# %% right: out.numpy().tolist() after torch.cuda.synchronize(losses.device)
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.synchronize(losses.device)
    return out.numpy().tolist()

al.check("05.d2h_read", read_losses)

# %% right: losses.to("cpu", non_blocking=True), then a synchronize before reading the new tensor
def read_losses(losses, out):
    host = losses.to("cpu", non_blocking=True)
    torch.cuda.synchronize()
    return host.tolist()

al.check("05.d2h_read", read_losses)

# %% right: torch.cuda.device(torch.cuda.current_device()) around the copy and the event
def read_losses(losses, out):
    with torch.cuda.device(torch.cuda.current_device()):
        out.copy_(losses, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: the copy on a side stream made once at top level, ordered after the losses with wait_stream, checked twice
side = torch.cuda.Stream()

def read_losses(losses, out):
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out.copy_(losses, non_blocking=True)
        done = side.record_event()
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)
al.check("05.d2h_read", read_losses)

# %% right: the copy on a side stream after wait_event on an event of the losses' stream, torch.cuda.set_stream to switch
def read_losses(losses, out):
    main = torch.cuda.current_stream()
    ready = main.record_event()
    side = torch.cuda.Stream()
    side.wait_event(ready)
    torch.cuda.set_stream(side)
    out.copy_(losses, non_blocking=True)
    torch.cuda.set_stream(main)
    side.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: the copy inside torch.cuda.StreamContext of the current stream, an event synchronized on after it
def read_losses(losses, out):
    with torch.cuda.StreamContext(torch.cuda.current_stream()):
        out.copy_(losses, non_blocking=True)
        e = torch.cuda.Event()
        e.record()
    e.synchronize()
    return [round(v, 3) for v in out.tolist()]

al.check("05.d2h_read", read_losses)

# %% right: losses.detach().cpu().tolist(), the usual way to log a loss
def read_losses(losses, out):
    return losses.detach().cpu().tolist()

al.check("05.d2h_read", read_losses)

# %% right: [v.item() for v in out] after an event synchronize
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return [v.item() for v in out]

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": no sync at all (the starter code)
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": an event recorded before the copy, synchronized on (it waits for the losses, not the copy), checked twice
def read_losses(losses, out):
    before = torch.cuda.Event()
    before.record()
    out.copy_(losses, non_blocking=True)
    before.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)
al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": torch.cuda.synchronize() before the copy instead of after it
def read_losses(losses, out):
    torch.cuda.synchronize()
    out.copy_(losses, non_blocking=True)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": synchronizing a side stream that has nothing queued
side = torch.cuda.Stream()

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    side.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": an event recorded on a side stream after the copy, synchronized on
def read_losses(losses, out):
    side = torch.cuda.Stream()
    out.copy_(losses, non_blocking=True)
    done = torch.cuda.Event()
    done.record(side)
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong: the copy on a side stream with no ordering after the losses: it copies them before they are written
def read_losses(losses, out):
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        out.copy_(losses, non_blocking=True)
    side.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": query() asked once, not in a loop
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    e = torch.cuda.Event()
    e.record()
    e.query()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": read first, then synchronize
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    values = out.tolist()
    torch.cuda.synchronize()
    return values

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": the host sleeps a millisecond instead of waiting for the copy
import time

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    time.sleep(0.001)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": [float(v) for v in out] with no sync
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    return [float(v) for v in out]

al.check("05.d2h_read", read_losses)

# %% wrong: losses.to("cpu", non_blocking=True) read at once: the new pinned tensor is not written yet either
def read_losses(losses, out):
    return losses.to("cpu", non_blocking=True).tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "as a list of numbers": the right sync, but out returned as a tensor
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.synchronize()
    return out

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": waits on the event with a stream (wait_event makes a stream wait, not the host)
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    torch.cuda.current_stream().wait_event(copied)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "as a list of numbers": the right sync, but list(out) is a list of 0-d tensors, not of numbers
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.synchronize()
    return list(out)

al.check("05.d2h_read", read_losses)

# %% right: a helper that copies and hands back the event, the host waits on it
def copy_async(dst, src):
    dst.copy_(src, non_blocking=True)
    return torch.cuda.current_stream().record_event()

def read_losses(losses, out):
    copy_async(out, losses).synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: slice assignment out[:] = losses (a blocking copy into the pinned buffer)
def read_losses(losses, out):
    out[:] = losses
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: numpy's asarray on the pinned buffer after an event synchronize
import numpy as np

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return np.asarray(out).tolist()

al.check("05.d2h_read", read_losses)

# %% right: the host sleeps a whole second after the copy (long past the copy's end: crude, but the numbers have landed)
import time

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    time.sleep(1.0)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: the copy's stream synchronized, the list read through a clone of the landed buffer
def read_losses(losses, out):
    stream = torch.cuda.current_stream()
    out.copy_(losses, non_blocking=True)
    stream.synchronize()
    return out.clone().tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": out cloned before the copy lands, the clone read after a synchronize
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    snapshot = out.clone()
    torch.cuda.synchronize()
    return snapshot.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": the copy on a side stream (ordered after the losses), the caller's stream synchronized
side = torch.cuda.Stream()

def read_losses(losses, out):
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        out.copy_(losses, non_blocking=True)
    caller.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": an event recorded after the copy but waited on only with query() in an if
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    if not done.query():
        torch.cuda.current_stream().wait_event(done)  # a stream wait: the host goes on
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "not this step's losses": gaming: caches the first answer and returns it every time
_cache = {}

def read_losses(losses, out):
    if "v" not in _cache:
        out.copy_(losses, non_blocking=True)
        torch.cuda.synchronize()
        _cache["v"] = out.tolist()
    return _cache["v"]

import asynclab.checks
asynclab.checks.check("05.d2h_read", read_losses)  # the first check fills the cache (not recorded)
al.check("05.d2h_read", read_losses)  # the second gets last time's numbers

# %% right: a small class that copies and waits on a blocking event of its own
class HostReader:
    def __init__(self):
        self.done = torch.cuda.Event(blocking=True)

    def read(self, gpu, host):
        host.copy_(gpu, non_blocking=True)
        self.done.record()
        self.done.synchronize()
        return host.tolist()

reader = HostReader()

def read_losses(losses, out):
    return reader.read(losses, out)

al.check("05.d2h_read", read_losses)
al.check("05.d2h_read", read_losses)

# %% right: a closure factory, the event made once and recorded on the current stream by name
def make_reader():
    copied = torch.cuda.Event()

    def read_losses(losses, out):
        out.copy_(losses, non_blocking=True)
        copied.record(torch.cuda.current_stream())
        copied.synchronize()
        return out.tolist()

    return read_losses

al.check("05.d2h_read", make_reader())

# %% right: the copy timed with two timing events, the host waits on the second
def read_losses(losses, out):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out.copy_(losses, non_blocking=True)
    end.record()
    end.synchronize()
    print(f"copy took {start.elapsed_time(end):.3f} ms")
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: an event.query() loop with short sleeps, then list(map(float, out))
import time

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    copied = torch.cuda.current_stream().record_event()
    while not copied.query():
        time.sleep(0.0005)
    return list(map(float, out))

al.check("05.d2h_read", read_losses)

# %% right: a throwaway blocking copy after the non_blocking one (it waits for the stream, the first copy included)
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    _ = losses.cpu()  # blocking: the host waits for everything queued on the stream before it
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: inside torch.inference_mode(), a synchronize, the values rounded
def read_losses(losses, out):
    with torch.inference_mode():
        out.copy_(losses, non_blocking=True)
        torch.cuda.synchronize()
        return [round(v, 6) for v in out.tolist()]

al.check("05.d2h_read", read_losses)

# %% right: the copy on a side stream that waits for an event of the caller's stream, losses.record_stream(side), an event synchronize
def read_losses(losses, out):
    main, side = torch.cuda.current_stream(), torch.cuda.Stream()
    side.wait_event(main.record_event())
    with torch.cuda.stream(side):
        losses.record_stream(side)
        out.copy_(losses, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: losses.to("cpu", torch.float64): a blocking copy (the dtype is given by position), read as doubles
def read_losses(losses, out):
    return losses.to("cpu", torch.float64).tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "not this step's losses": gaming: replays random draws from the random module's global generator
import random

random.seed(1234)

def read_losses(losses, out):
    replay = random.Random(1234)
    return [round(replay.uniform(0.5, 3.0), 3) for _ in range(8)]

al.check("05.d2h_read", read_losses)

# %% right: torch.accelerator.synchronize() after the copy
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.accelerator.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: torch.Event recorded after the copy, synchronized on
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    copied = torch.Event()
    copied.record()
    copied.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)


# %% wrong "before the copy had landed": torch.Event recorded before the copy, synchronized on
def read_losses(losses, out):
    copied = torch.Event()
    copied.record()
    out.copy_(losses, non_blocking=True)
    copied.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)


# %% wrong "before the copy had landed": a daemon thread waits for the copy, but the caller reads without joining it
import threading

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    ev = torch.cuda.Event()
    ev.record()
    threading.Thread(target=ev.synchronize, daemon=True).start()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: a worker thread waits for the copy's event, and the caller joins it before reading
import threading

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    ev = torch.cuda.Event()
    ev.record()
    waiter = threading.Thread(target=ev.synchronize)
    waiter.start()
    waiter.join()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: out[...] = losses (a blocking copy into the whole buffer)
def read_losses(losses, out):
    out[...] = losses
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "not this step's losses": the read on a fresh side stream "so as not to block the main stream" (it does not wait for the losses)
def read_losses(losses, out):
    with torch.cuda.stream(torch.cuda.Stream()):
        return losses.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "not this step's losses": [v.item() for v in losses] under a side stream made once at top level
side = torch.cuda.Stream()

def read_losses(losses, out):
    with torch.cuda.stream(side):
        return [v.item() for v in losses]

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": synchronize on a new event that was never recorded
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.Event().synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": the synchronize in a finally, after the return value is already read
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    try:
        return out.tolist()
    finally:
        torch.cuda.synchronize()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": polls an event recorded before the copy
def read_losses(losses, out):
    ready = torch.cuda.current_stream().record_event()
    out.copy_(losses, non_blocking=True)
    while not ready.query():
        pass
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": the current stream synchronized inside a side stream's block (that is the side stream)
side = torch.cuda.Stream()

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    with torch.cuda.stream(side):
        torch.cuda.current_stream().synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": losses.to("cpu", non_blocking=True) waited for, but out returned
def read_losses(losses, out):
    host = losses.to("cpu", non_blocking=True)
    torch.cuda.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": a numpy copy of out (np.array) made before the synchronize
import numpy as np

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    snapshot = np.array(out)
    torch.cuda.synchronize()
    return snapshot.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": a 5 ms sleep (the losses and their copy end later than that)
import time

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    time.sleep(0.005)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% raises "unexpected keyword argument 'non_blocking'": losses.cpu(non_blocking=True) (Tensor.cpu takes no such argument)
def read_losses(losses, out):
    host = losses.cpu(non_blocking=True)
    torch.cuda.synchronize()
    return host.tolist()

al.check("05.d2h_read", read_losses)

# %% raises "can't convert cuda:0 device type tensor to numpy": losses.numpy() straight from the GPU
def read_losses(losses, out):
    return losses.numpy().tolist()

al.check("05.d2h_read", read_losses)

# %% raises "Expected a cuda device": torch.cuda.synchronize(out.device) (out is on the CPU)
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.synchronize(out.device)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: a numpy view of out taken before the copy, read after the event's synchronize (it shares out's memory)
def read_losses(losses, out):
    view = out.numpy()
    out.copy_(losses, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    copied.synchronize()
    return [float(v) for v in view]

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": a numpy view of out read before any wait (the view shows what has landed so far)
def read_losses(losses, out):
    view = out.numpy()
    out.copy_(losses, non_blocking=True)
    got = view.tolist()
    torch.cuda.synchronize()
    return got

al.check("05.d2h_read", read_losses)

# %% right: the host busy-waits half a second on time.perf_counter after the copy (crude, but the numbers have landed)
import time

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:
        pass
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong "before the copy had landed": the host busy-waits 5 ms on time.monotonic (the losses and their copy end later)
import time

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    deadline = time.monotonic() + 0.005
    while time.monotonic() < deadline:
        pass
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.clone() copied into out, an event synchronized on after the copy
def read_losses(losses, out):
    snapshot = losses.clone()
    out.copy_(snapshot, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    copied.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses * 1 copied into out, torch.cuda.synchronize() before reading
def read_losses(losses, out):
    out.copy_(losses * 1, non_blocking=True)
    torch.cuda.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses + 0 copied into out, the current stream synchronized
def read_losses(losses, out):
    shifted = losses + 0
    out.copy_(shifted, non_blocking=True)
    torch.cuda.current_stream().synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.reshape(-1).view_as(losses) copied into out, an event synchronized on
def read_losses(losses, out):
    flat = losses.reshape(-1).view_as(losses)
    out.copy_(flat, non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.nan_to_num() copied into out, an event synchronized on
def read_losses(losses, out):
    out.copy_(losses.nan_to_num(), non_blocking=True)
    done = torch.cuda.current_stream().record_event()
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: torch.where(torch.isfinite(losses), losses, 0) copied into out, a synchronize
def read_losses(losses, out):
    clean = torch.where(torch.isfinite(losses), losses, 0)
    out.copy_(clean, non_blocking=True)
    torch.cuda.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.sum().item() as a guard after done.synchronize()
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    total = losses.sum().item()
    assert total == total, "a NaN loss"
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: an isfinite(losses).all() guard after the synchronize
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.synchronize()
    if not torch.isfinite(losses).all():
        raise ValueError("a loss is not finite")
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: a side losses.mean() kept on the GPU and discarded
def read_losses(losses, out):
    mean = losses.mean()  # for a log line later, never read here
    out.copy_(losses, non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.cpu().tolist() after the non_blocking copy has been waited for
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.synchronize()
    return losses.cpu().tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.double() copied to the host with a blocking .cpu(), read as doubles
def read_losses(losses, out):
    return losses.double().cpu().tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses[:4] and losses[4:] joined with torch.cat, copied into out, an event synchronized on
def read_losses(losses, out):
    joined = torch.cat([losses[:4], losses[4:]])
    out.copy_(joined, non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.clamp(min=0) copied into out, a synchronize
def read_losses(losses, out):
    out.copy_(losses.clamp(min=0), non_blocking=True)
    torch.cuda.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.round(decimals=3) copied into out, an event synchronized on
def read_losses(losses, out):
    out.copy_(losses.round(decimals=3), non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: torch.nn.functional.relu(losses) copied into out, the current stream synchronized
import torch.nn.functional as F

def read_losses(losses, out):
    out.copy_(F.relu(losses), non_blocking=True)
    torch.cuda.current_stream().synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.view(2, 4).flatten() copied into out, an event synchronized on
def read_losses(losses, out):
    out.copy_(losses.view(2, 4).flatten(), non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: torch.stack([losses, losses])[0] copied into out, a synchronize
def read_losses(losses, out):
    out.copy_(torch.stack([losses, losses])[0], non_blocking=True)
    torch.cuda.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.to(torch.float32) copied into out, an event synchronized on
def read_losses(losses, out):
    out.copy_(losses.to(torch.float32), non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: a side losses.abs().max() kept on the GPU, the copy waited for with a synchronize
def read_losses(losses, out):
    worst = losses.abs().max()
    out.copy_(losses, non_blocking=True)
    torch.cuda.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: everyday op: losses.detach().contiguous() copied into out, an event synchronized on
def read_losses(losses, out):
    out.copy_(losses.detach().contiguous(), non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    copied.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: the copy's own event, made by the current stream's record_event()
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.current_stream().record_event().synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: a slice assignment out[:] = losses (a blocking copy)
def read_losses(losses, out):
    out[:] = losses
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: element by element, host[i] = t[i] (each a blocking copy)
def read_losses(losses, out):
    for i in range(losses.shape[0]):
        out[i] = losses[i]
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: out[i].copy_(losses[i], non_blocking=True) into 0-d views, one event after the last
def read_losses(losses, out):
    for i in range(len(out)):
        out[i].copy_(losses[i], non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong: out[i].copy_(losses[i], non_blocking=True) into 0-d views, no wait
def read_losses(losses, out):
    for i, view in enumerate(out.unbind()):
        view.copy_(losses[i], non_blocking=True)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: non_blocking copy into a fresh pageable tensor (CUDA returns from a copy to pageable memory only once it is done)
def read_losses(losses, out):
    host = torch.empty(losses.shape, dtype=losses.dtype)
    host.copy_(losses, non_blocking=True)
    return host.tolist()

al.check("05.d2h_read", read_losses)

# %% right: non_blocking copy into a pageable clone of out, copied back into out
def read_losses(losses, out):
    staging = out.clone()
    staging.copy_(losses, non_blocking=True)
    out.copy_(staging)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong: losses.to("cpu", non_blocking=True) (pinned, not waited for)
def read_losses(losses, out):
    return losses.to("cpu", non_blocking=True).tolist()

al.check("05.d2h_read", read_losses)

# %% right: losses.to("cpu") (blocking)
def read_losses(losses, out):
    out.copy_(losses.to("cpu"))
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: the non_blocking copy, then the GPU tensor's own tolist() (which waits)
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    return losses.tolist()

al.check("05.d2h_read", read_losses)

# %% right: one .item() per loss
def read_losses(losses, out):
    return [loss.item() for loss in losses]

al.check("05.d2h_read", read_losses)

# %% wrong: numpy view of the pinned buffer, read without a wait
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    return out.numpy().tolist()

al.check("05.d2h_read", read_losses)

# %% right: numpy view of the pinned buffer, read after the stream's synchronize
def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    torch.cuda.current_stream().synchronize()
    return [float(v) for v in out.numpy()]

al.check("05.d2h_read", read_losses)

# %% wrong: the event recorded before the copy is queued
def read_losses(losses, out):
    ev = torch.cuda.Event()
    ev.record()
    out.copy_(losses, non_blocking=True)
    ev.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: a helper thread blocks in the copy's event, the caller joins it
import threading

def read_losses(losses, out):
    out.copy_(losses, non_blocking=True)
    ev = torch.cuda.Event()
    ev.record()
    t = threading.Thread(target=ev.synchronize, daemon=True)
    t.start()
    t.join()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: the blocking copy runs in a pool thread (on that thread's current stream, the default one)
from concurrent.futures import ThreadPoolExecutor

pool = ThreadPoolExecutor(max_workers=1)

def read_losses(losses, out):
    pool.submit(out.copy_, losses).result()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: the copy into a 2-d view of out, the event synchronized
def read_losses(losses, out):
    out.view(1, -1).copy_(losses.view(1, -1), non_blocking=True)
    ev = torch.cuda.Event()
    ev.record()
    ev.synchronize()
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% right: widened to float64 on the GPU, then a blocking .cpu()
def read_losses(losses, out):
    host = losses.double().cpu()
    return host.tolist()

al.check("05.d2h_read", read_losses)

# %% right: the pinned buffer seen through numpy as the destination, an event waited for
def read_losses(losses, out):
    dst = torch.from_numpy(out.numpy())
    dst.copy_(losses, non_blocking=True)
    ev = torch.cuda.Event()
    ev.record()
    ev.synchronize()
    return dst.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong: out.detach() as the destination (the same pinned memory), no wait
def read_losses(losses, out):
    out.detach().copy_(losses, non_blocking=True)
    return out.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong: the pinned buffer seen through numpy as the copy's destination, read without a wait
def read_losses(losses, out):
    dst = torch.from_numpy(out.numpy())
    dst.copy_(losses, non_blocking=True)
    return dst.tolist()

al.check("05.d2h_read", read_losses)

# %% wrong: a new tensor set_() onto out's storage as the destination, no wait
def read_losses(losses, out):
    alias = torch.empty(0, dtype=out.dtype).set_(out.untyped_storage(), out.storage_offset(), out.shape, out.stride())
    alias.copy_(losses, non_blocking=True)
    return alias.tolist()

al.check("05.d2h_read", read_losses)
