"""Exercise checkers say right to right answers and not yet to the starter code."""
import math
import statistics
import time

import pytest
import torch

import asynclab as al
from asynclab.trace.analysis import metrics
from asynclab.course import reference


def test_unknown_exercise_and_wrong_arity():
    with pytest.raises(KeyError, match="no exercise"):
        al.check("99.nope", 1)
    assert not al.check("00.cpu_timers_agree", 1).right  # takes two answers


def test_enqueue_span_answers():
    from asynclab.lessons.async_dispatch.exercises import enqueue_span_ms

    trace = reference.trace(1, "host_runs_ahead")
    span = enqueue_span_ms(trace)
    ev = trace.events
    kernels = ev[ev["kind"] == "compute"]
    assert len(kernels) == 20 and kernels["launch"].notna().all()
    assert 0 < span < metrics.host_lead(trace).gpu_busy_us / 1e3 / 10  # the host issues far faster than the GPU runs
    assert al.check("01.enqueue_span", span).right
    assert "µs" in al.check("01.enqueue_span", span * 1e3).message
    assert not al.check("01.enqueue_span", metrics.host_lead(trace).gpu_busy_us / 1e3).right  # GPU busy time
    assert not al.check("01.enqueue_span", None).right


def test_sync_ops_answers():
    right = {r["op"] for r in reference.results(1)["hidden_syncs"]["ops"] if r["syncs"]}
    assert al.check("01.sync_ops", right).right
    assert not al.check("01.sync_ops", right | {"t.sum()"}).right
    assert "not ops of the table" in al.check("01.sync_ops", {"x.foo()"}).message
    assert "set of op names" in al.check("01.sync_ops", ".item()").message


def test_no_sync_loop():
    def fast(losses):
        total = torch.zeros((), device=losses[0].device)
        for loss in losses:
            total += loss
        return total.item()

    assert al.check("01.no_sync_loop", fast).right
    assert not al.check("01.no_sync_loop", lambda losses: sum(x.item() for x in losses)).right
    assert not al.check("01.no_sync_loop", lambda losses: 0.0).right
    assert not al.check("01.no_sync_loop", lambda losses: sum(float(x) for x in losses)).right
    assert not al.check("01.no_sync_loop", lambda losses: sum(x.cpu().tolist() for x in losses)).right
    assert "raised ZeroDivisionError" in al.check("01.no_sync_loop", lambda losses: 1 / 0).message


def test_no_sync_loop_losses_stay_positive():
    """The checker's losses are all positive on every draw: an answer that keeps zero losses out sums them all."""
    def positives(losses):
        total = torch.zeros((), device=losses[0].device)
        for loss in losses:
            total += torch.where(loss > 0, loss, torch.zeros_like(loss))
        return total.item()

    for seed in range(30):
        torch.manual_seed(seed)
        assert al.check("01.no_sync_loop", positives).right, seed


def test_tail_share():
    times = reference.results(2)["spread"]["times_ms"]
    med = statistics.median(times)
    share = sum(t > 1.1 * med for t in times) / len(times)
    assert 0 < share < 0.5
    assert al.check("02.tail_share", share).right
    assert "percentage" in al.check("02.tail_share", share * 100).message
    assert not al.check("02.tail_share", share + 0.05).right


def naive_ms(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def events_ms(fn):
    if not torch.cuda.is_available():
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def test_event_timer_exercise():
    assert al.check("02.event_timer", events_ms).right
    assert not al.check("02.event_timer", naive_ms).right  # on a real or a simulated GPU
    assert not al.check("02.event_timer", lambda fn: 0.0).right
    assert "seconds" in al.check("02.event_timer", lambda fn: events_ms(fn) / 1e3).message
    assert "raised" in al.check("02.event_timer", lambda fn: 1 / 0).message


def sync_before_only_ms(fn):
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    return start.elapsed_time(end)


def no_timing_events_ms(fn):
    start, end = torch.cuda.Event(), torch.cuda.Event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def sync_wall_clock_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def test_event_timer_checks_behaviour_not_words():
    assert "Both events must be completed" in al.check("02.event_timer", sync_before_only_ms).message
    assert "enable_timing" in al.check("02.event_timer", no_timing_events_ms).message
    assert al.check("02.event_timer", sync_wall_clock_ms).right  # synchronize around the call is right too
    assert "timed the launch" in al.check("02.event_timer", naive_ms).message
    assert "still working when your function returned" in al.check("02.event_timer", naive_ms).message

    def read_then_wait_ms(fn):  # the work is done on return, but the time was read before it was
        t0 = time.perf_counter()
        fn()
        elapsed = (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize()
        return elapsed

    verdict = al.check("02.event_timer", read_then_wait_ms)
    assert not verdict.right and "timed the launch" in verdict.message


@pytest.mark.skipif(torch.cuda.is_available(), reason="the simulated GPU stands in only without a real one")
def test_event_timer_on_the_simulated_gpu_judges_only_clocks_it_drives():
    real_clock = time.perf_counter  # bound now, before the check: the check points it at the simulation's clock

    def bound_clock_ms(fn, clock=real_clock):
        torch.cuda.synchronize()
        t0 = clock()
        fn()
        torch.cuda.synchronize()
        return (clock() - t0) * 1e3

    assert al.check("02.event_timer", bound_clock_ms).right
    assert bound_clock_ms.__defaults__ == (real_clock,)  # put back after the check

    import datetime

    def wall_clock_ms(fn):  # datetime reads the system's clock in C: no simulation moves it
        torch.cuda.synchronize()
        t0 = datetime.datetime.now()
        fn()
        torch.cuda.synchronize()
        return (datetime.datetime.now() - t0).total_seconds() * 1e3

    verdict = al.check("02.event_timer", wall_clock_ms)
    assert not verdict.right and not verdict.judged and str(verdict).startswith("Not judged here: ")
    assert "datetime" in verdict.message and "not a fault in your answer" in verdict.message

    def twice_ms(fn):  # times two calls: about 40 ms for 20 ms of work
        return sync_wall_clock_ms(lambda: (fn(), fn()))

    assert not al.check("02.event_timer", twice_ms).right and al.check("02.event_timer", twice_ms).judged
    assert al.check("02.event_timer", lambda fn: sync_wall_clock_ms(fn) / 1e3).message.endswith("return milliseconds.")


def test_live_lessons_and_cpu_timers():
    hw = al.inventory()
    n = sum(1 for x in al.lessons.LESSONS if x.ready and x.gpus and not hw.live(x.gpus))
    assert al.check("00.replayed_lessons", n).right and not al.check("00.replayed_lessons", n + 1).right
    assert not al.check("00.replayed_lessons", False).right
    x = torch.randn(128, 128)
    naive = al.naive_timer(lambda: x @ x, repeats=20, device="cpu")
    assert not al.check("00.cpu_timers_agree", naive, naive).right  # two naive timings


@pytest.mark.parametrize("naive_ms, verdict, right", [(1.8, "naive/sync = 1.80: the CPU runs", True),
                                                       (0.55, "the CPU runs", True),
                                                       (3.6, "the gap is this machine's noise", True),
                                                       (0.3, "the gap is this machine's noise", True),
                                                       (10.0, "time the same function", False)])
def test_cpu_timers_agree_and_noise_is_never_the_learners(naive_ms, verdict, right):
    """On the CPU both timers time the whole op: a gap up to 5x is the machine's noise (a right answer, the noise
    named), beyond it two different functions were timed."""
    from asynclab.gpu.timing import Timing

    naive = Timing("naive", "wall clock on the CPU", (naive_ms, 2 * naive_ms), None, 0, 1)
    synced = Timing("sync", "wall clock on the CPU", (1.0, 1.5), None, 0, 1)
    got = al.check("00.cpu_timers_agree", naive, synced)
    assert verdict in got.message and got.right == right


# -- lesson 03 ------------------------------------------------------------------------------------------------
def _no_waits(work, x):
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        return work(x)


def _input_wait_only(work, x):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        return work(x)


def _both_waits(work, x):
    caller, side = torch.cuda.current_stream(), torch.cuda.Stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    y.record_stream(caller)
    return y


def _both_waits_with_events(work, x):
    caller, side = torch.cuda.current_stream(), torch.cuda.Stream()
    ready = torch.cuda.Event()
    ready.record(caller)
    side.wait_event(ready)
    with torch.cuda.stream(side):
        y = work(x)
    done = torch.cuda.Event()
    done.record(side)
    done.wait(caller)
    y.record_stream(caller)
    return y


def _both_waits_no_record_stream(work, x):
    caller, side = torch.cuda.current_stream(), torch.cuda.Stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = work(x)
    caller.wait_stream(side)
    return y


def _host_waits(work, x):
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        y = work(x)
    torch.cuda.synchronize()
    return y


@pytest.mark.parametrize("fn, right, says", [
    (_both_waits_no_record_stream, False, "record_stream"),
    (_host_waits, False, "the host waited"),
    (_no_waits, False, "read x before its producer"),
    (_input_wait_only, False, "caller read the result before"),
    (_both_waits, True, "both races are closed"),
    (_both_waits_with_events, True, "both races are closed"),
    (lambda work, x: work(x), False, "ran on the caller's stream"),
    (lambda work, x: 3, False, "not an int"),
    (lambda work, x: 1 / 0, False, "ZeroDivisionError"),
])
def test_wait_stream_fix_checks_what_the_code_does(fn, right, says):
    verdict = al.check("03.wait_stream_fix", fn)
    assert verdict.right is right and says in verdict.message


def test_which_gain_is_read_from_the_reference():
    from asynclab.lessons.streams.exercises import GAIN, GAIN_FIGURES

    head = reference.results(3)["headline"]
    truth = {name for name, figure in GAIN_FIGURES.items() if figure(head) >= GAIN}
    assert truth and truth != set(GAIN_FIGURES)  # the exercise has both kinds of answer
    assert al.check("03.which_gain", truth).right
    assert not al.check("03.which_gain", set(GAIN_FIGURES)).right
    assert not al.check("03.which_gain", truth - {next(iter(truth))}).right
    assert "copy the names" in al.check("03.which_gain", {"nope"}).message
    assert not al.check("03.which_gain", "four spin kernels").right


# -- lesson 04: the missing event wait, and who waited for whom ------------------------------------------------
def _racy_handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    with torch.cuda.stream(consumer):
        return use(x)


def _event_handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        return use(x)


def _host_waits_handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    done.synchronize()
    with torch.cuda.stream(consumer):
        return use(x)


def _wait_stream_handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(producer)
    with torch.cuda.stream(consumer):
        return use(x)


@pytest.mark.parametrize("fn, right, says", [
    (_racy_handoff, False, "read x before make() had written it"),
    (_event_handoff, True, "waited for the producer's event"),
    (_wait_stream_handoff, True, "waited for the producer's event"),
    (_host_waits_handoff, False, "the host waited"),
    (lambda p, c, make, use: use(make()), False, "inside `with torch.cuda.stream(producer):`"),
    (lambda p, c, make, use: 3, False, "inside `with torch.cuda.stream(producer):`"),
    (lambda p, c, make, use: 1 / 0, False, "ZeroDivisionError"),
])
def test_event_wait_fix_checks_what_the_code_does(fn, right, says):
    verdict = al.check("04.event_wait_fix", fn)
    assert verdict.right is right and says in verdict.message, verdict.message


def test_who_waited_is_read_from_the_cells_trace():
    from asynclab.lessons.events.exercises import exercise_trace, true_waits

    trace = exercise_trace()  # the cell's recording, reference/cell_who_waited.json.gz
    truth = true_waits(trace)
    assert len(truth) == 2  # two streams waited, in the reference
    assert al.check("04.who_waited", truth).right
    assert al.check("04.who_waited", {int(a): int(b) for a, b in truth}).right  # a dict works too
    flipped = {(b, a) for a, b in truth}
    assert not al.check("04.who_waited", flipped).right
    assert "2 pairs the wrong way round" in al.check("04.who_waited", flipped).message
    assert "1 missing" in al.check("04.who_waited", set(list(truth)[:1])).message
    assert "no stream 999" in al.check("04.who_waited", {(999, 7)}).message
    assert "pairs of whole stream numbers" in al.check("04.who_waited", "7 waited for 13").message
    assert not al.check("04.who_waited", {(int(a) + 0.5, int(b)) for a, b in truth}).right  # no rounding
    streams = sorted({lane.split("stream ")[-1].split(" ")[0] for lane in trace.lanes() if "· stream " in lane})
    assert len(streams) == 5
    everything = {(a, b) for a in streams for b in streams if a != b}
    verdict = al.check("04.who_waited", everything)
    assert not verdict.right and "each stream that waited" in verdict.message  # listing every pair gives nothing away


def test_who_waited_judges_the_trace_the_cell_drew():
    """The cell's own run (live or simulated) numbers its streams as its timeline shows them: given that run, the
    check reads the waits off it, not off the recording."""
    from asynclab.trace import load_trace

    def kernel(name, stream, ts, dur, corr=None):
        args = {"device": 0, "stream": stream} | ({"correlation": corr} if corr else {})
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": args}

    mine = load_trace({"traceEvents": [
        kernel("spin", 13, 0, 1000),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 4,
         "args": {"correlation": 2}},
        kernel("use", 7, 1002, 5, corr=2)]})
    assert al.check("04.who_waited", {(7, 13)}, trace=mine).right
    assert not al.check("04.who_waited", {(13, 7)}, trace=mine).right
    assert "no stream 13" in al.check("04.who_waited", {(7, 13)}).message  # the recording has other streams


def _polling_handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    while not done.query():  # the host polls: it waits too
        pass
    with torch.cuda.stream(consumer):
        return use(x)


def test_event_wait_fix_polling_host_waits_and_ends():
    verdict = al.check("04.event_wait_fix", _polling_handoff)
    assert not verdict.right and "the host waited" in verdict.message
    verdict = al.check("04.event_wait_fix", lambda p, c, make, use: (make(), use(torch.ones(4)))[1])
    assert not verdict.right and "pass it x" in verdict.message


# -- lesson 05: the overlap loop and the D2H read (simulated without a GPU, real kernels with one) ----------------
def _overlapped(chunks, compute, record_stream=True):
    copy, main = torch.cuda.Stream(), torch.cuda.current_stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy):
            x = chunk.to("cuda", non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record()
        main.wait_event(arrived)
        if record_stream:
            x.record_stream(main)  # x's memory must wait for compute, not only for the copy stream
        # without it, x is freed at the next chunk and the copy stream reuses its memory at once
        results.append(compute(x))
    return results


def _overlapped_racy(chunks, compute):
    copy = torch.cuda.Stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy):
            x = chunk.to("cuda", non_blocking=True)
        results.append(compute(x))
    return results


def _overlapped_compute_unwaited(chunks, compute):
    """The compute on a stream of its own, which the caller's stream never waits for."""
    copy, work = torch.cuda.Stream(), torch.cuda.Stream()
    results = []
    for chunk in chunks:
        with torch.cuda.stream(copy):
            x = chunk.to("cuda", non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record()
        work.wait_event(arrived)
        x.record_stream(work)
        with torch.cuda.stream(work):
            results.append(compute(x))
    return results


@pytest.mark.parametrize("fn, right, says", [
    (_overlapped, True, "hidden behind compute, every result right"),
    (_overlapped_racy, False, "results are wrong"),
    (_overlapped_compute_unwaited, False, "before the compute that makes them was done"),
    (lambda chunks, compute: _overlapped(chunks, compute, record_stream=False), False, "record_stream"),
    (lambda chunks, compute: [compute(c.to("cuda", non_blocking=True)) for c in chunks], False, "only 0%"),
    (lambda chunks, compute: [compute(c) for c in chunks], False, "takes a chunk on the GPU"),
    (lambda chunks, compute: [compute(c.to("cuda")) for c in chunks[:3]], False, "once per chunk"),
    (lambda chunks, compute: [compute(c.to("cuda")) for c in chunks][:3], False, "one result per chunk"),
    (lambda chunks, compute: None, False, "return a list of the results"),
    (lambda chunks, compute: [compute(c.to("cuda")) for c in chunks] + [compute(chunks[0].to("cuda"))], False,
     "once per chunk"),
    (lambda chunks, compute: [compute(c.to("cpu")) for c in chunks], False, "raised"),
    ("not a function", False, "pass your function"),
])
def test_overlap_loop_checks_overlap_and_results(fn, right, says):
    verdict = al.check("05.overlap_loop", fn)
    assert verdict.right is right and says in verdict.message, verdict.message


def _read_no_sync(losses, out):
    out.copy_(losses, non_blocking=True)
    return out.tolist()


def _read_event_sync(losses, out):
    out.copy_(losses, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    copied.synchronize()
    return out.tolist()


def _read_on_a_new_stream_no_wait(losses, out):
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # no wait for the stream that writes losses
        out.copy_(losses, non_blocking=True)
    side.synchronize()
    return out.tolist()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the simulated GPU stands in only without a real one")
def test_d2h_read_copy_on_an_unordered_stream_reads_stale_data_simulated():
    verdict = al.check("05.d2h_read", _read_on_a_new_stream_no_wait)
    assert not verdict.right and "before reading" in verdict.message, verdict.message


@pytest.mark.parametrize("fn, right, says", [
    (_read_no_sync, False, "still held the step before's numbers"),
    (_read_event_sync, True, "this step's losses"),
    (lambda losses, out: [1.0] * 8, False, "not this step's losses"),
    (lambda losses, out: 3, False, "as a list"),
    (lambda losses, out: [], False, "as a list of numbers"),
    (lambda losses, out: ["a"] * 8, False, "as a list of numbers"),
    (lambda losses, out: losses.tolist(), True, "this step's losses"),
])
def test_d2h_read_needs_the_sync(fn, right, says):
    verdict = al.check("05.d2h_read", fn)
    assert verdict.right is right and says in verdict.message, verdict.message


# ---------------------------------------------------------------------------------------------
# lesson 06: a copy between GPUs that overlaps, on the simulation of PyTorch's copy rule
# ---------------------------------------------------------------------------------------------
def _06_plain(send, multiply):
    y = send()
    with torch.cuda.device(1):
        z = multiply()
    return y, z


def _06_both_sides(send, multiply):
    s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)
    s0.wait_stream(torch.cuda.current_stream(0))
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.current_stream(1).wait_stream(s1)
    return y, z


def _06_no_producer_wait(send, multiply):  # the last version's published solution: x0's producer not waited for
    s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.current_stream(1).wait_stream(s1)
    return y, z


def _06_no_reader_wait(send, multiply):  # GPU 1's earlier reader of y1 not waited for
    s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)
    s0.wait_stream(torch.cuda.current_stream(0))
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.current_stream(1).wait_stream(s1)
    return y, z


def _06_no_wait(send, multiply):
    s0, s1 = torch.cuda.Stream(0), torch.cuda.Stream(1)
    with torch.cuda.stream(s0), torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    return y, z


def _06_receiver_side_only(send, multiply):  # GPU 0's default stream holds GPU 1's (measured on 2x H200)
    s1 = torch.cuda.Stream(1)
    with torch.cuda.stream(s1):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z


def _06_twice(send, multiply):
    return send(), (multiply(), multiply())[0]


def _06_sender_side_only(send, multiply):
    s0 = torch.cuda.Stream(0)
    with torch.cuda.stream(s0):
        y = send()
    with torch.cuda.device(1):
        z = multiply()
    return y, z


def _06_product_on_side(send, multiply):
    s1 = torch.cuda.Stream(1)
    y = send()
    with torch.cuda.stream(s1):
        z = multiply()
    torch.cuda.default_stream(1).wait_stream(s1)
    return y, z


def _06_product_on_gpu0(send, multiply):
    return send(), multiply()


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() >= 2, reason="checks the simulation")
@pytest.mark.parametrize("fn,right,says", [
    (_06_plain, False, "only 0% of the multiplication"),
    (_06_sender_side_only, False, "only 0% of the multiplication"),
    (_06_receiver_side_only, False, "only 0% of the multiplication"),
    (_06_twice, False, "call send() once and multiply() once"),
    (lambda send, multiply: (multiply(), send()), False, "in that order"),
    (_06_both_sides, True, "100% of the multiplication ran during the copy"),
    (_06_product_on_side, True, "100% of the multiplication ran during the copy"),
    (_06_no_wait, False, "read a result before it was there"),
    (_06_no_producer_wait, False, "the copy read x0 before GPU 0's current stream had finished writing it"),
    (_06_no_reader_wait, False, "the copy overwrote y1 while GPU 1's current stream was still reading it"),
    (_06_product_on_gpu0, False, "only 0% of the multiplication"),  # multiply() always runs on GPU 1
    (lambda send, multiply: 3, False, "not an int"),
    ("step", False, "pass your function"),
])
def test_overlap_copy_checks_what_the_streams_do(fn, right, says):
    v = al.check("06.overlap_copy", fn)
    assert v.right is right and says in v.message, v.message
    assert "simulated GPUs" in v.message or not right or "pass" in says


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() >= 2, reason="checks the reference")
def test_both_ways_prediction_against_the_reference():
    from asynclab.course import cells, registry

    ms = cells.recorded(registry.lesson(6).reference_dir, "p2p_bandwidth")["ms"]  # section 3's cell: 4 copies a run
    bw = {"one_way_ms": ms["one way"] / 4, "both_ways_ms": ms["both ways"] / 4}
    assert al.check("06.both_ways", bw["both_ways_ms"] * 1.1).right
    assert al.check("06.both_ways", bw["one_way_ms"]).right  # the full-duplex answer
    wrong = al.check("06.both_ways", 2 * bw["one_way_ms"])
    assert not wrong.right and "took turns" in wrong.message
    for bad in ("soon", -1.0, float("nan"), True):
        assert not al.check("06.both_ways", bad).right
    import numpy as np

    assert al.check("06.both_ways", np.float32(bw["both_ways_ms"])).right


@pytest.mark.gpu
@pytest.mark.skipif(not (torch.cuda.is_available() and torch.cuda.device_count() >= 2), reason="needs two CUDA GPUs")
@pytest.mark.parametrize("fn,right,says", [
    (_06_plain, False, "of the multiplication ran during the copy"),
    (_06_both_sides, True, "GPU 1's default stream read both results right"),
    (_06_product_on_side, True, "GPU 1's default stream read both results right"),
    (_06_no_wait, False, "read a result before it was there"),
    (_06_no_producer_wait, False, "the copy read x0 before GPU 0's current stream had finished writing it"),
    (_06_no_reader_wait, False, "the copy overwrote y1 while GPU 1's current stream was still reading it"),
    (_06_receiver_side_only, False, "of the multiplication ran during the copy"),
])
def test_overlap_copy_on_two_gpus(fn, right, says):
    v = al.check("06.overlap_copy", fn)
    assert v.right is right and says in v.message, v.message


# ---------------------------------------------------------------------------------------------
# lesson 07: checked against the schedule simulator
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,right,says", [
    (lambda p, m, t_f, t_b: (m + p - 1) * (t_f + t_b), True, "the simulator's step time"),
    (lambda p, m, t_f, t_b: (m + p - 1) / m * (m * (t_f + t_b)), True, "the simulator's step time"),  # Megatron's way
    (lambda p, m, t_f, t_b: round((m + p - 1) * (t_f + t_b)) + 0.5, False, "the simulator"),  # off by 0.5 ms
    (lambda p, m, t_f, t_b: m * (t_f + t_b), False, "the time with no bubble"),
    (lambda p, m, t_f, t_b: (m + p) * (t_f + t_b), False, "the simulator"),
    (lambda p, m, t_f, t_b: "soon", False, "must be a finite number"),
    (lambda p, m, t_f, t_b: max(op.end for op in __import__("asynclab.trace.pipeline.schedules").schedules.simulate(
        "gpipe", p, m, t_f, t_b)), False, "work it out from p, m, t_f and t_b"),
    (lambda p, m, t_f, t_b, sim=__import__("asynclab.trace.pipeline.schedules").schedules.simulate_trace:  # taken beforehand
     sim("gpipe", p, m, t_f, t_b).span_us() / 1e3, False, "work it out"),
])
def test_step_time_prediction(fn, right, says):
    v = al.check("07.step_time", fn)
    assert v.right is right and says in v.message, v.message
    from asynclab.trace.pipeline import schedules

    assert max(op.end for op in schedules.simulate("gpipe", 2, 2)) == 9.0  # the simulator is back afterwards


@pytest.mark.parametrize("fn,right,says", [
    (lambda p, t: max(1, math.ceil((p - 1) * (1 - t) / t - 1e-9)), True, "the fewest"),
    (lambda p, t: max(1, math.ceil((p - 1) * (1 - t) / t - 1e-9)) + 1, False, "is enough"),
    (lambda p, t: 1000, False, "is enough"),  # above the answer for every p <= 8 and target >= 5%
    (lambda p, t: 1, False, "over the target"),
    (lambda p, t: 2.5, False, "positive integer"),
    (lambda p, t, f=__import__("asynclab.trace.pipeline.schedules").schedules.bubble_formula:  # taken beforehand
     next(m for m in range(1, 999) if f("gpipe", p, m)["of_total"] <= t), False, "work it out from p and the target"),
])
def test_pick_m(fn, right, says):
    v = al.check("07.pick_m", fn)
    assert v.right is right and says in v.message, v.message


#: Values that are never right: not finite, or not a number at all (a bool is an int to Python, never a duration).
_NEVER_RIGHT = [float("nan"), float("inf"), -float("inf"), "1.5", None, True, [1.0], torch.tensor(1.0)]


def _value_answers(bad):
    """Each exercise that takes a value or a function returning one, given ``bad`` where the value goes."""
    from asynclab.lessons.your_step.exercises import baseline_diagnosis

    best = max(baseline_diagnosis()["findings"], key=lambda f: f["lost_ms_per_step"])["kind"]
    return {
        "00.replayed_lessons": (bad,),
        "01.enqueue_span": (bad,),
        "01.no_sync_loop": (lambda losses: bad,),
        "02.event_timer": (lambda fn: bad,),
        "02.tail_share": (bad,),
        "06.both_ways": (bad,),
        "07.step_time": (lambda p, m, t_f, t_b: bad,),
        "07.pick_m": (lambda p, target: bad,),
        "08.first_fix": (best, bad),
    }


@pytest.mark.parametrize("bad", _NEVER_RIGHT, ids=repr)
def test_no_value_check_passes_a_non_finite_or_wrong_typed_value(bad):
    for name, args in _value_answers(bad).items():
        verdict = al.check(name, *args)
        assert not verdict.right and verdict.judged, (name, bad, verdict)
        assert "raised" not in verdict.message or "your function" not in verdict.message, (name, bad, verdict)


def test_cpu_timers_are_judged_by_what_they_timed_not_by_the_machines_noise():
    """Two timings of the same code over the same tensor are right however far apart a loaded machine puts them;
    two of different ops are wrong however close."""
    from dataclasses import replace

    x = torch.randn(64, 64)
    naive = al.naive_timer(lambda: x.exp(), repeats=3, device="cpu")
    synced = al.sync_timer(lambda: x.exp(), repeats=3, device="cpu")
    noisy = replace(naive, times_ms=tuple(8 * t for t in synced.times_ms))  # another program held the CPU
    got = al.check("00.cpu_timers_agree", noisy, synced)
    assert got.right and "noise" in got.message
    other = al.sync_timer(lambda: x.sin(), repeats=3, device="cpu")
    close = replace(naive, times_ms=other.times_ms)
    assert not al.check("00.cpu_timers_agree", close, other).right


def test_a_compiled_answer_is_judged_as_the_python_it_compiles_and_says_so(monkeypatch):
    """A torch.compile'd answer (or one that calls a compiled helper) gets the eager code's verdict, with a note; on a
    PyTorch without torch.compiler.set_stance, a clear "not judged here" that names why, on a GPU or not."""
    import torch

    from asynclab.grading import compiled

    @torch.compile
    def per_step(losses):
        return sum(float(x) for x in losses)

    helper = torch.compile(lambda losses: torch.stack(losses).sum())

    def once(losses):
        return helper(losses).item()

    if compiled.too_old() is None:
        wrong, right = al.check("01.no_sync_loop", per_step), al.check("01.no_sync_loop", once)
        assert not wrong.right and "50 host reads" in wrong.message and compiled.EAGER_NOTE in wrong.message
        assert right.right and compiled.EAGER_NOTE in right.message
    monkeypatch.delattr(torch.compiler, "set_stance", raising=False)
    old = al.check("01.no_sync_loop", once)
    assert not old.judged and "PyTorch 2.6" in old.message and "not a fault in your answer" in old.message
    plain = al.check("01.no_sync_loop", lambda losses: torch.stack(losses).sum().item())
    assert plain.right and compiled.EAGER_NOTE not in plain.message
