# Learner answers to lesson 05's exercise 1, "Write the overlapped loop" (al.check("05.overlap_loop", overlapped)),
# each cell as typed after the notebook's set-up; run by tests/answers.py, verdicts checked by tests/grading/test_answers.py.

# %% right: the published fix: a copy stream made inside, an event per chunk, record_stream on the main stream
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record()
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: a copy stream made once at top level, reused across two checks
copy_stream = torch.cuda.Stream()

def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        arrived = copy_stream.record_event()
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)
al.check("05.overlap_loop", overlapped)

# %% right: a copy stream made lazily on the first call, kept in a global, checked twice
_copy = None

def overlapped(chunks, compute):
    global _copy
    if _copy is None:
        _copy = torch.cuda.Stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(_copy):
            x = chunk.to("cuda", non_blocking=True)
            done = torch.cuda.Event()
            done.record()
        done.wait(torch.cuda.current_stream())
        x.record_stream(torch.cuda.current_stream())
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)
al.check("05.overlap_loop", overlapped)

# %% wrong "the copies ran on 2 streams": two copy streams used in turn (out of issue order on an H100, 56% hidden, and on an H200)
def overlapped(chunks, compute):
    copies = [torch.cuda.Stream(), torch.cuda.Stream()]
    main = torch.cuda.current_stream()
    results = []
    for i, chunk in enumerate(chunks):
        s = copies[i % 2]
        with torch.cuda.stream(s):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_event(s.record_event())
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: main.wait_stream(copy_stream) after each chunk's copy (it waits for the copies queued so far, not later ones)
def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: .cuda(non_blocking=True), and x.record_stream(torch.cuda.current_stream()) after the block
def overlapped(chunks, compute):
    side = torch.cuda.Stream()
    out = []
    for c in chunks:
        with torch.cuda.stream(side):
            x = c.cuda(non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(side)
        torch.cuda.current_stream().wait_event(ev)
        x.record_stream(torch.cuda.current_stream())
        out.append(compute(x))
    return out

al.check("05.overlap_loop", overlapped)

# %% right: torch.cuda.set_stream to switch between the streams
def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    copy_stream = torch.cuda.Stream()
    results = []
    for chunk in chunks:
        torch.cuda.set_stream(copy_stream)
        x = chunk.to("cuda", non_blocking=True)
        arrived = torch.cuda.Event()
        arrived.record()
        torch.cuda.set_stream(main)
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: torch.cuda.StreamContext, and a stream made on torch.cuda.current_device()
def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream(device=torch.cuda.current_device())
    main = torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.StreamContext(copy_stream):
            x = chunk.to(device="cuda", non_blocking=True)
        arrived = torch.cuda.Event()
        arrived.record(copy_stream)
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: a compute stream of its own too, inside torch.cuda.device(...)
def overlapped(chunks, compute):
    results = []
    with torch.cuda.device(torch.cuda.current_device()):
        load, work = torch.cuda.Stream(), torch.cuda.Stream()
        for chunk in chunks:
            with torch.cuda.stream(load):
                x = chunk.to("cuda", non_blocking=True)
                ready = load.record_event()
            with torch.cuda.stream(work):
                work.wait_event(ready)
                x.record_stream(work)
                results.append(compute(x))
        torch.cuda.current_stream().wait_stream(work)
    return results

al.check("05.overlap_loop", overlapped)

# %% right: blocking=True events made once at top level, one per chunk, reused across two checks
arrived = [torch.cuda.Event(blocking=True) for _ in range(12)]
copy_stream = torch.cuda.Stream()

def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    results = []
    for i, chunk in enumerate(chunks):
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived[i].record()
        main.wait_event(arrived[i])
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)
al.check("05.overlap_loop", overlapped)

# %% right: the next chunk's copy queued before this chunk's compute (explicit prefetch)
def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream()
    main = torch.cuda.current_stream()

    def load(chunk):
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            return x, copy_stream.record_event()

    results = []
    nxt = load(chunks[0])
    for i in range(len(chunks)):
        x, ev = nxt
        if i + 1 < len(chunks):
            nxt = load(chunks[i + 1])
        main.wait_event(ev)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: a torch.cuda.synchronize() once, after the whole loop
def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
    torch.cuda.synchronize()
    return results

al.check("05.overlap_loop", overlapped)

# %% right: a GPU buffer made with torch.empty_like on the copy stream, filled with copy_(non_blocking=True)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = torch.empty_like(chunk, device="cuda")
            x.copy_(chunk, non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "of the copy time was hidden behind compute": one stream, copies and compute in turn (the starter code)
def overlapped(chunks, compute):
    results = []
    for chunk in chunks:
        x = chunk.to("cuda", non_blocking=True)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "of the copy time was hidden behind compute": blocking copies .to("cuda") on one stream
def overlapped(chunks, compute):
    return [compute(c.to("cuda")) for c in chunks]

al.check("05.overlap_loop", overlapped)

# %% wrong "of the copy time was hidden behind compute": main.wait_stream(copy_stream) once, after all the copies
def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    with torch.cuda.stream(copy_stream):
        xs = [chunk.to("cuda", non_blocking=True) for chunk in chunks]
    main.wait_stream(copy_stream)
    results = []
    for x in xs:
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "of the copy time was hidden behind compute": a torch.cuda.synchronize() after each chunk's compute
def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(copy_stream)
        results.append(compute(x))
        torch.cuda.synchronize()
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "of the copy time was hidden behind compute": compute queued on the copy stream too (one stream again)
def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream()
    results = []
    with torch.cuda.stream(copy_stream):
        for chunk in chunks:
            x = chunk.to("cuda", non_blocking=True)
            results.append(compute(x))
    torch.cuda.current_stream().wait_stream(copy_stream)
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "wait_stream(compute stream)": the copy stream also waits for the compute stream, each chunk
def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        copy_stream.wait_stream(main)
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": no record_stream: the copy stream's next allocation reuses a chunk compute still reads
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record()
        main.wait_event(arrived)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": record_stream on the copy stream (the stream that allocated x, so it changes nothing)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            x.record_stream(copy_stream)
        main.wait_stream(copy_stream)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": no wait at all: compute reads chunks that have not arrived
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": the event recorded before the copy, so it completes too early
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            arrived = torch.cuda.Event()
            arrived.record()
            x = chunk.to("cuda", non_blocking=True)
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": the copy stream waits for its own event, the compute stream for nothing
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record()
        copy_stream.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": off by one: each compute waits for the previous chunk's event, the first for none
copy_stream = torch.cuda.Stream()

def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    results, prev = [], None
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        if prev is not None:
            main.wait_event(prev)
        x.record_stream(main)
        results.append(compute(x))
        prev = copy_stream.record_event()
    return results

al.check("05.overlap_loop", overlapped)
al.check("05.overlap_loop", overlapped)

# %% wrong "call compute() once per chunk": a warm-up compute on the first chunk before the loop
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    compute(chunks[0].to("cuda"))
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "not across streams": a copy stream per chunk (from the stream pool), each waited for (in order on an H100, 86% hidden; out of order on an H200, 61%)
def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(s)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: blocking copies (non_blocking=False) on a copy stream of their own: the host waits for each copy, compute still overlaps the next
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda")  # pinned source, blocking: waits for the copy stream only
            arrived = copy_stream.record_event()
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: a generator that prefetches one chunk ahead, each yielded with its event
def prefetch(chunks, stream):
    for chunk in chunks:
        with torch.cuda.stream(stream):
            x = chunk.cuda(non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(stream)
        yield x, ev

def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    results = []
    for x, ev in prefetch(chunks, copy_stream):
        ev.wait(main)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: a redundant pin_memory() on chunks that are pinned already (PyTorch returns the same tensor)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        chunk = chunk if chunk.is_pinned() else chunk.pin_memory()
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record()
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: a Prefetcher class with __iter__, the copy stream waited for with wait_stream right after each copy
class Prefetcher:
    def __init__(self, chunks):
        self.chunks, self.stream = chunks, torch.cuda.Stream()

    def __iter__(self):
        main = torch.cuda.current_stream()
        for chunk in self.chunks:
            with torch.cuda.stream(self.stream):
                x = chunk.to(device="cuda", non_blocking=True)
            main.wait_stream(self.stream)
            x.record_stream(main)
            yield x

def overlapped(chunks, compute):
    return [compute(x) for x in Prefetcher(chunks)]

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": the GPU buffer allocated on the compute stream, filled on the copy stream with no wait for compute (a freed buffer is refilled while compute still reads it)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        x = torch.empty_like(chunk, device="cuda")  # allocated on main: main may reuse a block it just freed
        with torch.cuda.stream(copy_stream):
            x.copy_(chunk, non_blocking=True)  # ...but the copy stream writes it without waiting for main
            arrived = torch.cuda.Event()
            arrived.record()
        main.wait_event(arrived)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": the compute stream waits for the copy stream before the chunk's copy is queued
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        main.wait_stream(copy_stream)  # too early: this chunk's copy is not queued yet
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": compute on a compute stream of its own, record_stream names the default stream instead
def overlapped(chunks, compute):
    copy_stream, compute_stream = torch.cuda.Stream(), torch.cuda.Stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record()
        compute_stream.wait_event(arrived)
        x.record_stream(torch.cuda.default_stream())  # not the stream compute runs on
        with torch.cuda.stream(compute_stream):
            results.append(compute(x))
    torch.cuda.current_stream().wait_stream(compute_stream)
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "call compute() once per chunk": gaming: computes every chunk twice and keeps the second results
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record()
        main.wait_event(arrived)
        x.record_stream(main)
        compute(x)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: section 4's double buffering: two GPU buffers, an "arrived" and a "freed" event per buffer
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    with torch.cuda.stream(copy_stream):
        buffers = [torch.empty_like(chunks[0], device="cuda") for _ in range(2)]
    for b in buffers:
        b.record_stream(main)
    freed = [torch.cuda.Event() for _ in range(2)]
    results = []
    for i, chunk in enumerate(chunks):
        b = i % 2
        with torch.cuda.stream(copy_stream):
            copy_stream.wait_event(freed[b])  # compute is done with what this buffer held
            buffers[b].copy_(chunk, non_blocking=True)
            arrived = copy_stream.record_event()
        main.wait_event(arrived)
        results.append(compute(buffers[b]))
        freed[b].record(main)
    return results

al.check("05.overlap_loop", overlapped)

# %% right: one preallocated GPU buffer per chunk, made on the copy stream and filled with copy_
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    with torch.cuda.stream(copy_stream):
        gpu = [torch.empty_like(c, device="cuda") for c in chunks]
    results = []
    for chunk, x in zip(chunks, gpu):
        with torch.cuda.stream(copy_stream):
            x.copy_(chunk, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record()
        main.wait_event(ready)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: the roles swapped: copies on the default stream, compute on a side stream, joined back at the end
def overlapped(chunks, compute):
    main, work = torch.cuda.current_stream(), torch.cuda.Stream()
    results = []
    for chunk in chunks:
        x = chunk.to("cuda", non_blocking=True)
        arrived = main.record_event()
        with torch.cuda.stream(work):
            work.wait_event(arrived)
            x.record_stream(work)
            results.append(compute(x))
    main.wait_stream(work)
    return results

al.check("05.overlap_loop", overlapped)

# %% right: every chunk's GPU copy kept in a list until the end, instead of record_stream
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    on_gpu, results = [], []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            on_gpu.append(x)  # keeps the memory: nobody can reuse it while compute reads it
        main.wait_stream(copy_stream)
        results.append(compute(x))
    main.synchronize()
    return results

al.check("05.overlap_loop", overlapped)

# %% right: copy_stream.synchronize() after each copy: the host waits for the copy only, compute still overlaps the next copy
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        copy_stream.synchronize()
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: every copy queued up front on the copy stream, each with its event; compute waits chunk by chunk
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    staged = []
    with torch.cuda.stream(copy_stream):
        for chunk in chunks:
            x = chunk.to("cuda", non_blocking=True)
            staged.append((x, copy_stream.record_event()))
    results = []
    for x, ev in staged:
        main.wait_event(ev)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: a high-priority copy stream and functools.partial for the upload helper
import functools

def upload(stream, chunk):
    with torch.cuda.stream(stream):
        x = chunk.cuda(non_blocking=True)
        ev = torch.cuda.Event()
        ev.record(stream)
    return x, ev

def overlapped(chunks, compute):
    up = functools.partial(upload, torch.cuda.Stream(priority=-1))
    main = torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        x, ev = up(chunk)
        main.wait_event(ev)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: under torch.inference_mode(), the copy stream used as a context manager (with copy_stream:)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    with torch.inference_mode():
        for chunk in chunks:
            with copy_stream:
                x = chunk.to("cuda", non_blocking=True)
                done = copy_stream.record_event()
            main.wait_event(done)
            x.record_stream(main)
            results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: pin_memory() called on every chunk (they are pinned already: PyTorch hands back the same tensor)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.pin_memory().to("cuda", non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record()
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: blocking=True events, the host waits for each chunk's arrival with event.synchronize() (compute still overlaps the next copy)
def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived = torch.cuda.Event(blocking=True)
            arrived.record()
        arrived.synchronize()
        x.record_stream(torch.cuda.current_stream())
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: a prefetch thread puts (chunk on the GPU, event) into a queue; the main thread computes
import queue
import threading

def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    q = queue.Queue()

    def loader():
        with torch.cuda.stream(copy_stream):
            for chunk in chunks:
                x = chunk.to("cuda", non_blocking=True)
                q.put((x, copy_stream.record_event()))

    t = threading.Thread(target=loader)
    t.start()
    results = []
    for _ in chunks:
        x, ev = q.get()
        main.wait_event(ev)
        x.record_stream(main)
        results.append(compute(x))
    t.join()
    return results

al.check("05.overlap_loop", overlapped)

# %% right: chunk.to("cuda", torch.float32, non_blocking=True) (dtype given by position, as Tensor.to allows)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", torch.float32, non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: the device given as torch.cuda.current_device() (an int)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    dev = torch.cuda.current_device()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to(dev, non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% right: gaming: the serial loop, with a long spin kernel on a side stream that every copy overlaps (a GPU judges it right too)
def overlapped(chunks, compute):
    with torch.cuda.stream(torch.cuda.Stream()):
        torch.cuda._sleep(300_000_000)  # "compute" on the GPU the whole time
    return [compute(c.to("cuda", non_blocking=True)) for c in chunks]

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": double buffering without the "freed" wait: the copy stream refills a buffer compute still reads
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    buffers = [torch.empty_like(chunks[0], device="cuda") for _ in range(2)]
    results = []
    for i, chunk in enumerate(chunks):
        buf = buffers[i % 2]
        with torch.cuda.stream(copy_stream):
            buf.copy_(chunk, non_blocking=True)
            arrived = copy_stream.record_event()
        main.wait_event(arrived)
        results.append(compute(buf))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": one preallocated GPU buffer, refilled by the copy stream for every chunk
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    buf = torch.empty_like(chunks[0], device="cuda")
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            buf.copy_(chunk, non_blocking=True)
        main.wait_stream(copy_stream)
        results.append(compute(buf))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": double buffering with the "freed" event recorded before compute instead of after
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    buffers = [torch.empty_like(chunks[0], device="cuda") for _ in range(2)]
    freed = [torch.cuda.Event() for _ in range(2)]
    results = []
    for i, chunk in enumerate(chunks):
        b = i % 2
        with torch.cuda.stream(copy_stream):
            copy_stream.wait_event(freed[b])
            buffers[b].copy_(chunk, non_blocking=True)
            arrived = copy_stream.record_event()
        main.wait_event(arrived)
        freed[b].record(main)  # too early: compute below still reads the buffer
        results.append(compute(buffers[b]))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "of the copy time was hidden": each chunk cloned first "so the caller's data stays untouched" (the clone is pageable)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        chunk = chunk.clone()
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record()
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "of the copy time was hidden": a torch.cuda.synchronize() every 4 chunks "to bound memory" (at most 9 of 12 copies can hide)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for i, chunk in enumerate(chunks):
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
        if i % 4 == 3:
            torch.cuda.synchronize()
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "of the copy time was hidden": the main stream synchronized after each compute (the next copy is issued only then)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
        main.synchronize()
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "of the copy time was hidden": torch.cuda.synchronize() before each copy "so the GPU starts clean"
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        torch.cuda.synchronize()
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": the "arrived" event recorded after leaving the copy stream's block (on the main stream)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        arrived = torch.cuda.Event()
        arrived.record()
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": main captured inside the copy stream's block (it is the copy stream), so compute's stream waits for nothing
def overlapped(chunks, compute):
    copy_stream = torch.cuda.Stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            main = torch.cuda.current_stream()
            main.wait_stream(copy_stream)
        x.record_stream(torch.cuda.current_stream())
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "return a list": a generator that yields each result
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        yield compute(x)

al.check("05.overlap_loop", overlapped)

# %% right: one event object re-recorded for every chunk (each wait_event takes the record made just before it)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    arrived = torch.cuda.Event()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived.record()
        main.wait_event(arrived)
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "results are wrong": one event object, but waited for before it is re-recorded (each chunk waits for the previous copy; the first for nothing)
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    arrived = torch.cuda.Event()
    results = []
    for chunk in chunks:
        main.wait_event(arrived)
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
            arrived.record()
        x.record_stream(main)
        results.append(compute(x))
    return results

al.check("05.overlap_loop", overlapped)

# %% wrong "return a list": the results stacked into one tensor with torch.stack
def overlapped(chunks, compute):
    copy_stream, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy_stream):
            x = chunk.to("cuda", non_blocking=True)
        main.wait_stream(copy_stream)
        x.record_stream(main)
        results.append(compute(x))
    return torch.stack(results)

al.check("05.overlap_loop", overlapped)

# %% right: copy stream made once at the top, record_event / wait_event, record_stream
copier = torch.cuda.Stream()

def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    out = []
    for c in chunks:
        with torch.cuda.stream(copier):
            g = c.to("cuda", non_blocking=True)
        main.wait_event(copier.record_event())
        g.record_stream(main)
        out.append(compute(g))
    return out

al.check("05.overlap_loop", overlapped)

# %% right: empty_like on the GPU, then copy_ from a slice view of the pinned chunk (a view of pinned memory is pinned)
def overlapped(chunks, compute):
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    res = []
    for c in chunks:
        with torch.cuda.stream(side):
            g = torch.empty_like(c, device="cuda")
            g.copy_(c[:], non_blocking=True)
            e = torch.cuda.Event()
            e.record()
        main.wait_event(e)
        g.record_stream(main)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% wrong: a torch.cuda.synchronize() after every compute (nothing can overlap)
def overlapped(chunks, compute):
    side = torch.cuda.Stream()
    res = []
    for c in chunks:
        with torch.cuda.stream(side):
            g = c.to("cuda", non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)
        res.append(compute(g))
        torch.cuda.synchronize()
    return res

al.check("05.overlap_loop", overlapped)

# %% wrong: a new copy stream for every chunk (the copies land on several streams of the pool)
def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    res = []
    for c in chunks:
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            g = c.to("cuda", non_blocking=True)
        main.wait_stream(s)
        g.record_stream(main)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% wrong: the copy stream waits for the compute stream before each copy (copies queue behind compute)
def overlapped(chunks, compute):
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    res = []
    for c in chunks:
        side.wait_stream(main)
        with torch.cuda.stream(side):
            g = c.to("cuda", non_blocking=True)
        main.wait_stream(side)
        g.record_stream(main)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% right: the copies issued from a worker thread (stream made current there), compute from the caller as each arrives
from concurrent.futures import ThreadPoolExecutor

copier = torch.cuda.Stream()

def overlapped(chunks, compute):
    main = torch.cuda.current_stream()

    def upload(c):
        with torch.cuda.stream(copier):
            g = c.to("cuda", non_blocking=True)
            return g, copier.record_event()

    with ThreadPoolExecutor(max_workers=1) as pool:
        futures = [pool.submit(upload, c) for c in chunks]
        res = []
        for f in futures:
            g, ev = f.result()
            main.wait_event(ev)
            g.record_stream(main)
            res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% wrong: no record_stream and nothing keeps the copies alive (the copy stream reuses their memory)
def overlapped(chunks, compute):
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    res = []
    for c in chunks:
        with torch.cuda.stream(side):
            g = c.to("cuda", non_blocking=True)
        main.wait_stream(side)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% right: record_stream for every copy after the loop (it matters only when a copy is freed)
def overlapped(chunks, compute):
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    res, keep = [], []
    for c in chunks:
        with torch.cuda.stream(side):
            g = c.to("cuda", non_blocking=True)
        main.wait_stream(side)
        keep.append(g)
        res.append(compute(g))
    for g in keep:
        g.record_stream(main)
    return res

al.check("05.overlap_loop", overlapped)

# %% wrong: all copies first, one wait for them all, then all the compute (right values, nothing hidden)
def overlapped(chunks, compute):
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    with torch.cuda.stream(side):
        on_gpu = [c.to("cuda", non_blocking=True) for c in chunks]
    main.wait_stream(side)
    for g in on_gpu:
        g.record_stream(main)
    return [compute(g) for g in on_gpu]

al.check("05.overlap_loop", overlapped)

# %% right: the chunk's .data (the same page-locked memory)
side = torch.cuda.Stream()

def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    res = []
    for c in chunks:
        with torch.cuda.stream(side):
            g = c.data.to("cuda", non_blocking=True)
        main.wait_stream(side)
        g.record_stream(main)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% right: a flat view of the chunk, copied, then viewed back on the GPU
side = torch.cuda.Stream()

def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    res = []
    for c in chunks:
        with torch.cuda.stream(side):
            g = c.view(-1).to("cuda", non_blocking=True).view(c.shape)
        main.wait_stream(side)
        g.record_stream(main)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% right: the chunk seen through numpy and back (same page-locked memory, so the copy is still a DMA one)
def overlapped(chunks, compute):
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    res = []
    for c in chunks:
        src = torch.from_numpy(c.numpy())
        with torch.cuda.stream(side):
            g = src.to("cuda", non_blocking=True)
        main.wait_stream(side)
        g.record_stream(main)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% raises "to have the same dtype": the chunk halved after its copy (compute's matrix product gets a half and a float)
def overlapped(chunks, compute):
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    res = []
    for c in chunks:
        with torch.cuda.stream(side):
            g = c.to("cuda", non_blocking=True).half()
        main.wait_stream(side)
        g.record_stream(main)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% raises "to have the same dtype": the chunk cast to bfloat16 on the host before the copy (half the bytes to move)
def overlapped(chunks, compute):
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    res = []
    for c in chunks:
        with torch.cuda.stream(side):
            g = c.to(torch.bfloat16).to("cuda", non_blocking=True)
        main.wait_stream(side)
        g.record_stream(main)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% right: a new tensor set_() onto the chunk's storage (the same page-locked memory)
side = torch.cuda.Stream()

def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    res = []
    for c in chunks:
        alias = torch.empty(0, dtype=c.dtype).set_(c.untyped_storage(), c.storage_offset(), c.shape, c.stride())
        with torch.cuda.stream(side):
            g = alias.to("cuda", non_blocking=True)
        main.wait_stream(side)
        g.record_stream(main)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% raises "to have the same dtype": the chunk widened to float64 on the GPU before compute
side = torch.cuda.Stream()

def overlapped(chunks, compute):
    main = torch.cuda.current_stream()
    res = []
    for c in chunks:
        with torch.cuda.stream(side):
            g = c.to("cuda", non_blocking=True).double()
        main.wait_stream(side)
        g.record_stream(main)
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% wrong "ran in": the whole loop under autocast(float16), to make the compute cheaper (the prompt says not to)
def overlapped(chunks, compute):
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    res = []
    with torch.autocast("cuda", dtype=torch.float16):
        for c in chunks:
            with torch.cuda.stream(side):
                g = c.to("cuda", non_blocking=True)
            main.wait_stream(side)
            g.record_stream(main)
            res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% wrong "ran in": only the compute call under autocast(bfloat16)
def overlapped(chunks, compute):
    copy = torch.cuda.Stream()
    out = []
    for c in chunks:
        with torch.cuda.stream(copy):
            x = c.to("cuda", non_blocking=True)
            done = torch.cuda.Event()
            done.record()
        torch.cuda.current_stream().wait_event(done)
        x.record_stream(torch.cuda.current_stream())
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            out.append(compute(x))
    return out

al.check("05.overlap_loop", overlapped)

# %% wrong "ran in": TF32 switched on for float32 products inside the loop (faster compute, fewer mantissa bits)
def overlapped(chunks, compute):
    torch.backends.cuda.matmul.allow_tf32 = True
    s = torch.cuda.Stream()
    res = []
    for c in chunks:
        with torch.cuda.stream(s):
            g = c.cuda(non_blocking=True)
        torch.cuda.current_stream().wait_stream(s)
        g.record_stream(torch.cuda.current_stream())
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% right: autocast present but switched off (enabled=False), the compute stays float32
def overlapped(chunks, compute):
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    res = []
    with torch.autocast("cuda", dtype=torch.float16, enabled=False):
        for c in chunks:
            with torch.cuda.stream(side):
                g = c.to("cuda", non_blocking=True)
            main.wait_stream(side)
            g.record_stream(main)
            res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)

# %% right: float32 matmul precision "highest" (PyTorch's default), said out loud
torch.set_float32_matmul_precision("highest")

def overlapped(chunks, compute):
    side = torch.cuda.Stream()
    res = []
    for c in chunks:
        with torch.cuda.stream(side):
            g = c.to("cuda", non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)
        g.record_stream(torch.cuda.current_stream())
        res.append(compute(g))
    return res

al.check("05.overlap_loop", overlapped)
