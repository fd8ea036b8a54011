# Learner answers to lesson 05's exercise 1, "Write the overlapped loop" (al.check("05.overlap_loop", overlapped)),
# each cell as typed after the notebook's set-up; run by tests/answers.py, verdicts checked by tests/test_answers.py.

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

# %% wrong "of the copy time was hidden behind compute": the copy stream also waits for the compute stream, each chunk
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
