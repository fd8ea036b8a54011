# Answers to lesson 06's exercise 1 (06.overlap_copy), written the way learners write them.
# Each cell runs in a fresh process after the notebook's set-up; tests/answers.py says how.

# %% right: the published solution's streams made once at top level, reused across two checks
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))  # x0's producer is done
    s1.wait_stream(torch.cuda.current_stream(1))  # GPU 1's earlier readers of y1 are done
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.current_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% right: nested with blocks, streams made with device= keywords, GPU 1's default stream named
s0 = torch.cuda.Stream(device=0)
s1 = torch.cuda.Stream(device=1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.default_stream(0))
    s1.wait_stream(torch.cuda.default_stream(1))
    with torch.cuda.stream(s0):
        with torch.cuda.stream(s1):
            y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% right: devices written as torch.device("cuda", i)
gpu0, gpu1 = torch.device("cuda", 0), torch.device("cuda", 1)
s0, s1 = torch.cuda.Stream(gpu0), torch.cuda.Stream(gpu1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(gpu0))
    s1.wait_stream(torch.cuda.current_stream(gpu1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(gpu1):
        z = multiply()
        torch.cuda.current_stream(gpu1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% right: devices written as "cuda:0" and "cuda:1"
s0 = torch.cuda.Stream("cuda:0")
s1 = torch.cuda.Stream("cuda:1")

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream("cuda:0"))
    s1.wait_stream(torch.cuda.current_stream("cuda:1"))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device("cuda:1"):
        z = multiply()
    torch.cuda.default_stream("cuda:1").wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% right: torch.cuda.set_stream on both GPUs, then the previous streams put back
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    before0, before1 = torch.cuda.current_stream(0), torch.cuda.current_stream(1)
    s0.wait_stream(before0)
    s1.wait_stream(before1)
    torch.cuda.set_stream(s0)
    torch.cuda.set_stream(s1)
    y = send()
    torch.cuda.set_stream(before1)
    torch.cuda.set_stream(before0)
    z = multiply()
    before1.wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% right: torch.cuda.StreamContext written out
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.StreamContext(s0), torch.cuda.StreamContext(s1):
        y = send()
    z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% right: the copy from the default streams, the product on a side stream of GPU 1, then wait_stream
side1 = torch.cuda.Stream(1)

def step(send, multiply):
    y = send()                          # GPU 1's default stream waits for the copy
    with torch.cuda.stream(side1):
        z = multiply()                  # a side stream owes the copy nothing
    torch.cuda.default_stream(1).wait_stream(side1)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% right: an event recorded on GPU 1's side stream after the copy, waited on by its default stream
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    e = torch.cuda.Event()
    e.record(s1)
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_event(e)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% right: streams made inside with torch.cuda.device(i) blocks, on every call
def step(send, multiply):
    with torch.cuda.device(0):
        s0 = torch.cuda.Stream()
    with torch.cuda.device(1):
        s1 = torch.cuda.Stream()
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
        torch.cuda.current_stream().wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% right: streams made lazily on the first call, kept in globals; GPU 1's stream read with current_stream(1)
s0 = s1 = None

def step(send, multiply):
    global s0, s1
    if s0 is None:
        s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)
    s0.wait_stream(torch.cuda.current_stream(0))  # x0 was written there
    reader = torch.cuda.current_stream(1)
    s1.wait_stream(reader)              # nothing on GPU 1 may still use the destination
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    reader.wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% right: GPU 1's default stream waits for GPU 0's side stream, the one the copy ran on
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    z = multiply()
    torch.cuda.default_stream(1).wait_stream(s0)
    return y, z

al.check("06.overlap_copy", step)

# %% right: side stream on GPU 0 for the copy, the product on a side stream of GPU 1
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))  # x0's producer is done (GPU 1's default stream is current: the copy waits for it)
    with torch.cuda.stream(s0):
        y = send()                      # fences GPU 1's default stream, not s1
    with torch.cuda.stream(s1):
        z = multiply()
    torch.cuda.current_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% right: side streams everywhere, the product on a second side stream of GPU 1, both waited for
s0, s1, s2 = torch.cuda.Stream(0), torch.cuda.Stream(1), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.stream(s2):
        z = multiply()
    main1 = torch.cuda.default_stream(1)
    main1.wait_stream(s1)
    main1.wait_stream(s2)
    return y, z

al.check("06.overlap_copy", step)

# %% right: events from record_event, waited on with event.wait
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    torch.cuda.current_stream(0).record_event().wait(s0)
    torch.cuda.current_stream(1).record_event().wait(s1)
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    copied = s1.record_event()
    with torch.cuda.device(1):
        z = multiply()
    copied.wait(torch.cuda.current_stream(1))
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% right: the host waits for GPU 1 after issuing both, instead of a stream wait
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.synchronize(1)
    return y, z

al.check("06.overlap_copy", step)

# %% right: streams used as context managers themselves (torch.Stream supports with)
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with s0, s1:
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% right: GPU 1's default stream found from the result's device
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(y.device).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": everything on the default streams, as the starter
def step(send, multiply):
    y = send()
    with torch.cuda.device(1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": a side stream on GPU 0 only: the copy fences GPU 1's default stream
s0 = torch.cuda.Stream(0)

def step(send, multiply):
    with torch.cuda.stream(s0):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": a side stream on GPU 1 only: GPU 0's default stream holds GPU 1's
s1 = torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": both side streams made on GPU 0 (torch.cuda.Stream() with no device)
s0, s1 = torch.cuda.Stream(), torch.cuda.Stream()

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": the product inside the side-stream block, on s1, which waits for the copy
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% wrong "read a result before it was there": side streams on both GPUs, no wait_stream
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% wrong "read a result before it was there": the wait on GPU 0's stream (the current device is GPU 0)
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.current_stream().wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "read a result before it was there": the wait turned round, the side stream waits for the default
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    s1.wait_stream(torch.cuda.default_stream(1))
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% wrong "read a result before it was there": the wait inside the block, where GPU 1's current stream is s1
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
        torch.cuda.current_stream(1).wait_stream(s1)
    with torch.cuda.device(1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "read a result before it was there": the wait issued before the copy, so it waits for nothing
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    torch.cuda.default_stream(1).wait_stream(s1)
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% wrong "read a result before it was there": the event recorded before the copy was issued
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    e = torch.cuda.Event()
    e.record(s1)
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_event(e)
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": the wait issued before the product, so the product waits for the copy
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    torch.cuda.default_stream(1).wait_stream(s1)
    with torch.cuda.device(1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": the product issued first, then the copy, all on the default streams
def step(send, multiply):
    with torch.cuda.device(1):
        z = multiply()
    y = send()
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": the host synchronizes between the copy and the product
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    torch.cuda.synchronize()
    with torch.cuda.device(1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)
al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": the host waits for the side stream of GPU 1 before the product
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    s1.synchronize()
    with torch.cuda.device(1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "call send() once": send called twice, once to copy and once to return
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return send(), z

al.check("06.overlap_copy", step)

# %% wrong "in that order": the results returned as (product, copy)
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return z, y

al.check("06.overlap_copy", step)

# %% wrong "return (what send() returned": only the copy returned
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y

al.check("06.overlap_copy", step)

# %% wrong "read a result before it was there": the copy on the default streams, the product on a side stream of GPU 1 that nobody waits for
s1 = torch.cuda.Stream(1)

def step(send, multiply):
    y = send()
    with torch.cuda.stream(s1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)

# %% right: a class that owns the streams, contextlib.ExitStack enters both
import contextlib

class Step:
    def __init__(self):
        self.s0, self.s1 = torch.cuda.Stream(device=0), torch.cuda.Stream(device=1)

    def __call__(self, send, multiply):
        self.s0.wait_stream(torch.cuda.current_stream(0))
        self.s1.wait_stream(torch.cuda.current_stream(1))
        with contextlib.ExitStack() as stack:
            for s in (self.s0, self.s1):
                stack.enter_context(torch.cuda.stream(s))
            y = send()
        with torch.cuda.device(1):
            z = multiply()
        torch.cuda.default_stream(1).wait_stream(self.s1)
        return y, z

step = Step()
al.check("06.overlap_copy", step)

# %% right: set_device(1) around the product and back, the wait given as an event of s1
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
        copied = s1.record_event()
    before = torch.cuda.current_device()
    torch.cuda.set_device(1)
    z = multiply()
    torch.cuda.current_stream().wait_event(copied)  # GPU 1's default stream, current now
    torch.cuda.set_device(before)
    return y, z

al.check("06.overlap_copy", step)

# %% right: the product first on GPU 1's default stream, the copy issued after it on side streams of both GPUs
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))  # before the product: GPU 1's earlier work only
    with torch.cuda.device(1):
        z = multiply()  # queued first, on GPU 1's default stream
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()  # waits for s1 (empty), not for the default stream
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% right: functools.partial helpers for "make this stream wait for that one"
import functools

s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)
gpu1_waits_for = functools.partial(torch.cuda.Stream.wait_stream, torch.cuda.default_stream(1))

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    gpu1_waits_for(s1)
    return y, z

al.check("06.overlap_copy", step)

# On two H200s (torch 2.11) PyTorch's message is only "Event device ": the device index, an 8-bit integer, is
# written into it as a character, and index 0 is the NUL byte that ends the message. The simulated GPU says it whole.
# %% raises "Event device": one Event object recorded on a stream of GPU 0, then on one of GPU 1 (CUDA events belong to one device)
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)
fence = torch.cuda.Event()

def wait_for(waiter, stream):
    fence.record(stream)
    waiter.wait_event(fence)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    gpu1 = torch.cuda.default_stream(1)
    wait_for(gpu1, s0)  # the stream the copy ran on...
    wait_for(gpu1, s1)  # ...and the one it fenced, to be safe
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": the product first on s1, then the copy with s1 current (the copy waits for s1, so for the product)
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.device(1), torch.cuda.stream(s1):
        z = multiply()
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "read a result before it was there": the product on a side stream of GPU 1, waited for with an event recorded before it
s1 = torch.cuda.Stream(1)

def step(send, multiply):
    y = send()
    with torch.cuda.device(1), torch.cuda.stream(s1):
        done = torch.cuda.Event()
        done.record()  # before the product: marks nothing
        z = multiply()
    torch.cuda.default_stream(1).wait_event(done)
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "ran during the copy": gaming: the starter code, with a printed "Right:" line
def step(send, multiply):
    y = send()
    with torch.cuda.device(1):
        z = multiply()
    print("Right: 100% of the multiplication ran during the copy")
    return y, z

al.check("06.overlap_copy", step)

# %% right: one side stream per GPU made once at the top, nested contexts, GPU 1's default stream waits
s_send = torch.cuda.Stream(device=0)
s_recv = torch.cuda.Stream(device=1)

def step(send, multiply):
    s_send.wait_stream(torch.cuda.current_stream(0))
    s_recv.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s_send):
        with torch.cuda.stream(s_recv):
            y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s_recv)
    return y, z

al.check("06.overlap_copy", step)

# %% right: GPU 1's default stream waits for the sender's stream (the copy ran there)
s0 = torch.cuda.Stream(device=0)
s1 = torch.cuda.Stream(device=1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
        torch.cuda.current_stream().wait_stream(s0)
    return y, z

al.check("06.overlap_copy", step)

# %% right: the product on a second side stream of GPU 1, both waited for by GPU 1's default stream
s0 = torch.cuda.Stream(device=0)
s1 = torch.cuda.Stream(device=1)
m1 = torch.cuda.Stream(device=1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1), torch.cuda.stream(m1):
        z = multiply()
    d1 = torch.cuda.default_stream(1)
    d1.wait_stream(s1)
    d1.wait_stream(m1)
    z.record_stream(d1)
    return y, z

al.check("06.overlap_copy", step)

# %% right: send() run by a worker thread that makes both side streams current there
import threading

s0 = torch.cuda.Stream(device=0)
s1 = torch.cuda.Stream(device=1)

def step(send, multiply):
    box = {}

    def sender():
        s0.wait_stream(torch.cuda.current_stream(0))  # a new thread starts on the default streams
        s1.wait_stream(torch.cuda.current_stream(1))
        with torch.cuda.stream(s0), torch.cuda.stream(s1):
            box["y"] = send()

    t = threading.Thread(target=sender)
    t.start()
    t.join()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return box["y"], z

al.check("06.overlap_copy", step)

# %% wrong: a side stream on the receiver only (GPU 0's default stream sends, and holds GPU 1's)
s1 = torch.cuda.Stream(device=1)

def step(send, multiply):
    with torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% wrong: a side stream on the sender only (PyTorch makes GPU 1's current stream, the default, wait for the copy)
s0 = torch.cuda.Stream(device=0)

def step(send, multiply):
    with torch.cuda.stream(s0):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)

# %% wrong: both streams made on GPU 0 (the current device), so GPU 1 keeps its default stream
s0, s1 = torch.cuda.Stream(), torch.cuda.Stream()

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.current_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% wrong: side streams on both GPUs, but GPU 1's default stream never waits for the copy
s0 = torch.cuda.Stream(device=0)
s1 = torch.cuda.Stream(device=1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    return y, z

al.check("06.overlap_copy", step)

# %% wrong: the product queued inside the side streams' block (on s1, behind the copy's wait)
s0 = torch.cuda.Stream(device=0)
s1 = torch.cuda.Stream(device=1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
        with torch.cuda.device(1):
            z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
# %% wrong "read x0 before": the published solution of the last version: no wait for x0's producer
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()                                  # runs on s0, fenced by s1: no default stream involved
    with torch.cuda.device(1):
        z = multiply()                              # GPU 1's default stream owes the copy nothing
    torch.cuda.current_stream(1).wait_stream(s1)    # GPU 1's default stream waits for the copy before reading y
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "read x0 before": GPU 1's side stream waits for GPU 1's default stream, GPU 0's side stream waits for nothing
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s1.wait_stream(torch.cuda.default_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "overwrote y1": the producer waited for, but GPU 1's side stream owes GPU 1's earlier readers nothing
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    s0.wait_stream(torch.cuda.current_stream(0))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.current_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)

# %% wrong "read x0 before": the waits made with the current device as GPU 1, so both go to GPU 1's streams
s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)

def step(send, multiply):
    with torch.cuda.device(1):
        s0.wait_stream(torch.cuda.current_stream())  # GPU 1's current stream, not GPU 0's
        s1.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z

al.check("06.overlap_copy", step)
