"""Lesson 04 experiments: the event API, a race made certain and fixed, the CUDA sanitizer, allocator reuse, events as timers."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from asynclab.course.experiments import annotate as _annotate
from asynclab.course.experiments import Experiment, dig, lesson_run_all
from asynclab.gpu.timing import spin_cycles, wall_ms
from asynclab.course.experiments import record_gpu_trace as _record_trace
from asynclab.course.experiments import gpu_or_note
from asynclab.gpu.processes import side_by_side

LESSON = "04"

#: Every experiment of this lesson needs a GPU (on the CPU each returns a note saying so): nothing to size down.
CPU_KWARGS: dict[str, dict[str, Any]] = {name: {} for name in (
    "event_api", "race", "sanitizer", "allocator_reuse", "event_timer_modes")}

#: What each GPU-only experiment returns on a machine without a GPU.
NO_GPU = "no CUDA GPU: events order work on GPU streams (the CPU runs every op to the end, in order)"

#: The elements of the tensors every race here reads and writes.
SIZE = 1 << 20


def _sample(t: torch.Tensor, n: int = 4) -> list[float]:
    return [float(v) for v in t[:n].tolist()]


# -- 1: the event API on one timeline ------------------------------------------------------------------------
def event_api(device: Any = None, spin_ms: float = 20.0, poll_ms: float = 2.0,
              path: str | Path | None = None) -> dict[str, Any]:
    """``record``, ``wait_event``, ``query``, ``synchronize`` and ``elapsed_time``, each in one run.

    The default stream records ``start``, spins for ``spin_ms`` (spin A), records ``mid``, spins again
    (spin B) and records ``end``. A side stream waits for ``mid`` (``side.wait_event(mid)``) and then
    writes a tensor. The host polls ``mid.query()`` every ``poll_ms`` until it turns True, then blocks
    in ``end.synchronize()``. The wait, the polling and the synchronize each sit in a ``record_function``
    bracket of their own name, so the timeline shows where each happened. With ``path`` the trace is saved there.

    Returns ``{"query_false_polls", "query_true_after_ms" (host, from mid.record() to the first True),
    "synchronize_host_ms" (host time blocked in end.synchronize()), "wait_event_host_ms" (host time of
    the wait_event call), "elapsed_a_ms", "elapsed_b_ms" (elapsed_time of each spin), "side_right",
    "spin_ms", "device"}`` (None values on the CPU).

    Example:
        >>> event_api("cpu")["query_false_polls"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, query_false_polls=None, query_true_after_ms=None, synchronize_host_ms=None,
                           wait_event_host_ms=None, elapsed_a_ms=None, elapsed_b_ms=None, side_right=None,
                           spin_ms=spin_ms)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        side = torch.cuda.Stream()
        flag = torch.zeros(SIZE, device=dev)
        start, mid, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))

        def once() -> dict[str, Any]:
            flag.zero_()
            torch.cuda.synchronize()
            with _annotate("the event API"):
                timings = api()
            return {**timings, "elapsed_a_ms": start.elapsed_time(mid), "elapsed_b_ms": mid.elapsed_time(end),
                    "side_right": bool((flag == 1).all())}

        def api() -> dict[str, Any]:
            start.record()
            torch.cuda._sleep(cycles)  # spin A
            mid.record()
            t_mid = time.perf_counter()
            torch.cuda._sleep(cycles)  # spin B
            end.record()
            t0 = time.perf_counter()
            with _annotate("side.wait_event(mid)"):
                side.wait_event(mid)
            wait_ms = wall_ms(t0)
            with torch.cuda.stream(side):
                flag.fill_(1.0)  # the side stream's work: it may start only when spin A is done
            polls = 0
            with _annotate("mid.query() polled"):
                while not mid.query():
                    polls += 1
                    time.sleep(poll_ms / 1e3)
            true_after = wall_ms(t_mid)
            t0 = time.perf_counter()
            with _annotate("end.synchronize()"):
                end.synchronize()
            sync_ms = wall_ms(t0)
            torch.cuda.synchronize()
            return {"query_false_polls": polls, "query_true_after_ms": true_after, "synchronize_host_ms": sync_ms,
                    "wait_event_host_ms": wait_ms}

        once()  # kernels loaded, stream pool built: first uses can wait for the GPU
        out = once()
        if path is not None:
            _record_trace(path, once)
    return {**out, "spin_ms": spin_ms, "device": str(dev)}


# -- 2: a race, made certain, and its fixes --------------------------------------------------------------------
#: The three ways the consumer can meet the producer in :func:`race`.
HANDOFFS = ("no wait", "wait_event", "synchronize")


class _Race:
    """A producer stream that spins, then writes ``x = 1``; a consumer stream that computes ``y = x + 1``.

    ``launch(handoff)`` queues it once: with no wait, with ``consumer.wait_event(done)`` (the GPU waits),
    or with ``done.synchronize()`` before the consumer's launch (the host waits).
    """

    def __init__(self, dev: torch.device, spin_ms: float, size: int = SIZE, warm: bool = True):
        self.cycles = spin_cycles(dev, spin_ms)
        self.producer, self.consumer = torch.cuda.Stream(), torch.cuda.Stream()
        # made up front: building the stream pool and a kernel's first launch can each wait for the GPU
        self.x, self.y = torch.zeros(size, device=dev), torch.zeros(size, device=dev)
        self.done = torch.cuda.Event()
        for handoff in HANDOFFS[1:] if warm else ():
            self.run(handoff)  # loads every kernel

    def launch(self, handoff: str) -> float:
        """Queue the producer, the handoff and the consumer; returns the host's time in the handoff, in ms."""
        if handoff not in HANDOFFS:
            raise ValueError(f"handoff must be one of {HANDOFFS}, got {handoff!r}")
        with torch.cuda.stream(self.producer):
            torch.cuda._sleep(self.cycles)  # the producer is late...
            self.x.fill_(1.0)  # ...and writes x after its spin
            self.done.record()  # a marker in the producer's queue, right after the write
        t0 = time.perf_counter()
        if handoff == "wait_event":
            with _annotate("consumer.wait_event(done)"):
                self.consumer.wait_event(self.done)  # the consumer's *GPU queue* waits; the host goes on
        elif handoff == "synchronize":
            with _annotate("done.synchronize()"):
                self.done.synchronize()  # the *host* waits until the write is done
        host_ms = wall_ms(t0)
        with torch.cuda.stream(self.consumer):
            torch.add(self.x, 1, out=self.y)  # the consumer reads x
        return host_ms

    def run(self, handoff: str) -> dict[str, Any]:
        """Reset, launch under an annotation named after the handoff, wait, and count the wrong values of y."""
        self.x.zero_(), self.y.zero_()
        torch.cuda.synchronize()
        with _annotate(handoff):
            host_ms = self.launch(handoff)
            torch.cuda.synchronize()
        return {"wrong": int((self.y != 2).sum()), "sample": _sample(self.y), "host_ms": host_ms}


def race(device: Any = None, spin_ms: float = 20.0, size: int = SIZE, path: str | Path | None = None) -> dict[str, Any]:
    """A producer/consumer race on two side streams, certain to bite, and its two fixes.

    The producer stream spins for ``spin_ms`` (``torch.cuda._sleep``) and then writes ``x = 1``; the
    consumer stream computes ``y = x + 1``. Without a wait the consumer reads ``x`` during the spin: the
    old zeros, so ``y`` is 1 where it should be 2. ``consumer.wait_event(done)`` makes the consumer's
    queue wait on the GPU; ``done.synchronize()`` makes the host wait before it launches the consumer.
    With ``path`` a trace of the three (annotated ``"no wait"``, ``"wait_event"``, ``"synchronize"``) is
    saved there.

    Returns ``{"<handoff>": {"wrong", "sample" (first values of y), "host_ms" (the handoff call on the
    host)} for each of :data:`HANDOFFS`, "elements", "spin_ms", "device"}`` (None values on the CPU).

    Example:
        >>> race("cpu")["no wait"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, elements=size, spin_ms=spin_ms, **dict.fromkeys(HANDOFFS))
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        r = _Race(dev, spin_ms, size)
        out: dict[str, Any] = {h: r.run(h) for h in HANDOFFS}
        if path is not None:
            _record_trace(path, lambda: [r.run(h) for h in HANDOFFS])
    return {**out, "elements": size, "spin_ms": spin_ms, "device": str(dev)}


# -- 3: caught by a tool: the CUDA sanitizer ---------------------------------------------------------------------
def _sanitized_race(fixed: bool) -> dict[str, Any]:
    """Run the race once inside this process, which must have started with ``TORCH_CUDA_SANITIZER=1``."""
    from torch.cuda._sanitizer import CUDASanitizerErrors

    dev = torch.device("cuda", torch.cuda.current_device())
    r = _Race(dev, 5.0, warm=False)  # no warm-up runs: they would be sanitized too
    torch.cuda.synchronize()  # x and y were zeroed on the default stream; the sanitizer rightly wants that ordered
    streams = {str(r.producer.cuda_stream): "producer", str(r.consumer.cuda_stream): "consumer",
               str(torch.cuda.default_stream().cuda_stream): "default"}
    try:
        r.launch("wait_event" if fixed else "no wait")
        torch.cuda.synchronize()
    except CUDASanitizerErrors as err:
        return {"reported": True, "errors": [_describe_error(e, streams) for e in err.errors],
                "report": "\n".join(trim_report(str(e), streams) for e in err.errors)}
    return {"reported": False, "errors": [], "report": ""}


#: Stack frames of the sanitized run's own harness, left out of its report.
_HARNESS_FRAMES = ("in <module>", "in _main", "in _sanitized_race")


def trim_report(report: str, streams: dict[str, str] | None = None) -> str:
    """A sanitizer report with only this package's stack frames (paths from ``asynclab/``, less the harness
    that starts the run), and stream handles named (``stream 1082666560`` -> ``stream 1082666560 (consumer)``).

    Example:
        >>> print(trim_report('Access by stream 5 during kernel:\\nWith stack trace:\\n'
        ...                   '  File "/x/torch/_ops.py", line 9, in f\\n    g()\\n'
        ...                   '  File "/y/src/asynclab/lessons/events/experiments.py", line 3, in run\\n    h()',
        ...                   {"5": "consumer"}))
        Access by stream 5 (consumer) during kernel:
        With stack trace:
          File "asynclab/lessons/events/experiments.py", line 3, in run
            h()
    """
    out: list[str] = []
    skip = False
    for line in report.splitlines():
        stripped = line.strip()
        if stripped.startswith("File "):
            path = stripped.split('"')[1] if '"' in stripped else ""
            skip = "/asynclab/" not in path or stripped.endswith(_HARNESS_FRAMES)
            if not skip:
                line = line.replace(path, "asynclab/" + path.split("/asynclab/", 1)[1])
        elif not line.startswith("    "):
            skip = False
        if skip:
            continue
        for handle, name in (streams or {}).items():
            line = line.replace(f"by stream {handle} ", f"by stream {handle} ({name}) ")
        out.append(line)
    return "\n".join(out)


def _describe_error(err: Any, streams: dict[str, str]) -> dict[str, Any]:
    """The parts of one sanitizer error a learner needs: the tensor, both accesses, their streams and kernels."""
    def access(a: Any) -> dict[str, Any]:
        here = [f"{f.name} (line {f.lineno})" for f in a.stack_trace if f.filename == __file__]
        return {"stream": streams.get(str(a.stream), str(a.stream)), "operator": str(a.operator),
                "type": str(a.type), "arguments": list(a.aliases), "is_output": bool(a.is_output), "in": here}

    return {"kind": type(err).__name__, "data_ptr": int(getattr(err, "data_ptr", 0)),
            "current": access(err.current_access), "previous": access(err.previous_access)}


def sanitizer(device: Any = None, timeout_s: float = 120.0) -> dict[str, Any]:
    """The race of :func:`race` (unfixed, then fixed with ``wait_event``) under PyTorch's CUDA sanitizer.

    Each runs in a fresh Python process started with ``TORCH_CUDA_SANITIZER=1``, so this process (a
    notebook's kernel, say) stays unsanitized. The sanitizer follows every kernel's reads and writes
    and every stream and event synchronisation, and reports an access to a tensor that no
    synchronisation orders after the previous write.

    Returns ``{"unfixed": {"reported", "errors", "report"}, "fixed": {...}, "device"}`` (None values on
    the CPU).

    Example:
        >>> sanitizer("cpu")["unfixed"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, unfixed=None, fixed=None)
    if cpu is not None:
        return cpu
    env = {**os.environ, "TORCH_CUDA_SANITIZER": "1", "CUDA_VISIBLE_DEVICES": str(dev.index or 0)}
    out: dict[str, Any] = {"device": str(dev)}
    runs = side_by_side({name: (["-m", __name__, "--sanitized-race", name], env) for name in ("unfixed", "fixed")},
                        timeout_s, "sanitized run")
    for name, proc in runs.items():
        lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"the sanitized run ({name}) failed: {tail[0]}")
        out[name] = json.loads(lines[-1])
    return out


# -- 4: the caching allocator and record_stream ------------------------------------------------------------------
#: How the tensor is kept safe while another stream still reads it, in :func:`allocator_reuse`.
PROTECTIONS = ("nothing", "record_stream", "keep a reference")


def allocator_reuse(device: Any = None, spin_ms: float = 20.0, size: int = SIZE,
                    path: str | Path | None = None) -> dict[str, Any]:
    """A tensor freed on the host while another stream still reads it, and what the allocator does next.

    ``a = ones`` is allocated on the default stream. A side stream waits for it (correctly), spins for
    ``spin_ms`` and then reads it (``out = a * 2``). The host drops ``a`` at once and allocates
    ``b = full(7)`` on the default stream. The caching allocator knows only that ``a`` belonged to the
    default stream, so it hands ``b`` the same memory, and the default stream writes 7 there before the
    side stream's late read: ``out`` becomes 14. ``a.record_stream(side)`` tells the allocator to keep the
    block until the side stream's queued work is done; keeping a reference until an event recorded on
    the side stream completes does the same by hand. With ``path`` a trace of the three is saved there.

    Returns ``{"<protection>": {"same_block", "wrong", "sample"} for each of :data:`PROTECTIONS`,
    "elements", "spin_ms", "device"}`` (None values on the CPU).

    Example:
        >>> allocator_reuse("cpu")["nothing"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, elements=size, spin_ms=spin_ms, **dict.fromkeys(PROTECTIONS))
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        side, default = torch.cuda.Stream(), torch.cuda.current_stream()
        out_t = torch.zeros(size, device=dev)

        def once(protection: str) -> dict[str, Any]:
            out_t.zero_()
            torch.cuda.synchronize()
            with _annotate(protection):
                a = torch.ones(size, device=dev)  # allocated on the default stream
                side.wait_stream(default)  # the side stream waits until a is written
                with torch.cuda.stream(side):
                    torch.cuda._sleep(cycles)  # ...and it is late
                    torch.mul(a, 2, out=out_t)  # it reads a
                kept, done = None, None
                if protection == "record_stream":
                    a.record_stream(side)  # the allocator keeps a's block until side's queued work is done
                elif protection == "keep a reference":
                    kept, done = a, torch.cuda.Event()
                    done.record(side)  # free it only after this event
                ptr = a.data_ptr()
                with _annotate("del a; b = full(7)"):
                    del a  # the host is done with a: its block goes back to the allocator
                    b = torch.full((size,), 7.0, device=dev)  # the next allocation on the default stream
                same = b.data_ptr() == ptr
                torch.cuda.synchronize()
            if done is not None:
                done.synchronize()
                del kept
            return {"same_block": bool(same), "wrong": int((out_t != 2).sum()), "sample": _sample(out_t)}

        for p in PROTECTIONS[1:]:
            once(p)  # loads every kernel
        result = {p: once(p) for p in PROTECTIONS}
        if path is not None:
            _record_trace(path, lambda: [once(p) for p in PROTECTIONS])
    return {**result, "elements": size, "spin_ms": spin_ms, "device": str(dev)}


# -- 5: events as a timer, and how the host waits -------------------------------------------------------------------
def event_timer_modes(device: Any = None, spin_ms: float = 50.0) -> dict[str, Any]:
    """How the host waits in ``event.synchronize()``: spinning (the default) or asleep (``blocking=True``).

    The default stream spins for ``spin_ms``; the host then waits on an event recorded after it. For
    each kind of event, the host's wall time and CPU time (``time.process_time``) during the wait
    are measured: a busy-waiting host burns a CPU core the whole time; a blocking event puts the
    thread to sleep. Also records the error ``elapsed_time`` gives for events made without
    ``enable_timing=True``.

    Returns ``{"spin": {"wall_ms", "cpu_ms"}, "blocking": {...}, "elapsed_ms", "no_timing_error", "spin_ms",
    "device"}`` (None values on the CPU).

    Example:
        >>> event_timer_modes("cpu")["blocking"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, spin=None, blocking=None, elapsed_ms=None, no_timing_error=None,
                           spin_ms=spin_ms)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)

        def wait(blocking: bool) -> dict[str, float]:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True, blocking=blocking)
            torch.cuda.synchronize()
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            w0, c0 = time.perf_counter(), time.process_time()
            end.synchronize()
            cpu = (time.process_time() - c0) * 1e3
            return {"wall_ms": wall_ms(w0), "cpu_ms": cpu, "elapsed_ms": start.elapsed_time(end)}

        wait(False), wait(True)
        spin, blocking = wait(False), wait(True)
        a, b = torch.cuda.Event(), torch.cuda.Event()
        a.record(), b.record()
        b.synchronize()
        try:
            a.elapsed_time(b)
            error = None
        except (RuntimeError, ValueError) as err:  # PyTorch raises ValueError today
            error = f"{type(err).__name__}: {str(err).strip().splitlines()[0]}"
    return {"spin": spin, "blocking": blocking, "elapsed_ms": spin["elapsed_ms"], "no_timing_error": error,
            "spin_ms": spin_ms, "device": str(dev)}


# -- everything, as the recording script runs it -----------------------------------------------------------------------
def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The figures lesson 04's claims rest on, under the names its issue gives (None where not measured).

    Example:
        >>> headline({"race": {"no wait": {"wrong": 5}, "wait_event": {"wrong": 0}}})["race_wrong_values_fixed"]
        0
    """
    def get(*keys: str) -> Any:
        return dig(results, *keys)

    wrong_unfixed, wrong_fixed = get("race", "no wait", "wrong"), get("race", "wait_event", "wrong")
    unfixed_reported, fixed_reported = get("sanitizer", "unfixed", "reported"), get("sanitizer", "fixed", "reported")
    reuse_unfixed, reuse_fixed = get("allocator_reuse", "nothing", "wrong"), get("allocator_reuse", "record_stream", "wrong")
    return {
        "race_wrong_values_unfixed": wrong_unfixed,
        "race_wrong_values_fixed": wrong_fixed,
        "race_elements": get("race", "elements"),
        "sanitizer_reported_race_unfixed": unfixed_reported,
        "sanitizer_clean_fixed": None if fixed_reported is None else not fixed_reported,
        "allocator_reuse_corrupted_unfixed": None if reuse_unfixed is None else reuse_unfixed > 0,
        "allocator_reuse_corrupted_fixed": None if reuse_fixed is None else reuse_fixed > 0,
    }


#: The event each trace's figures are about, called out on them: (part of the event's name, label).
CALLOUTS = {"race": [("CUDAFunctorOnSelf_add", "the consumer's y = x + 1")]}

#: Every lesson 04 experiment, in the order ``run_all`` runs them: its key in the results, its function, the trace
#: it writes (<trace_dir>/<name>.json.gz) and how many GPUs that trace needs.
EXPERIMENTS: list[Experiment] = [
    Experiment("event_api", event_api, "event_api"),
    Experiment("race", race, "race"),
    Experiment("sanitizer", sanitizer),
    Experiment("allocator_reuse", allocator_reuse, "allocator_reuse"),
    Experiment("event_timer_modes", event_timer_modes),
]

run_all = lesson_run_all(LESSON, EXPERIMENTS, CPU_KWARGS, headline)


def _main(argv: list[str]) -> int:
    """``python -m asynclab.lessons.events.experiments --sanitized-race unfixed|fixed``: one line of JSON."""
    if len(argv) != 2 or argv[0] != "--sanitized-race" or argv[1] not in ("unfixed", "fixed"):
        print("usage: python -m asynclab.lessons.events.experiments --sanitized-race unfixed|fixed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("the sanitized race needs a CUDA GPU", file=sys.stderr)
        return 2
    print(json.dumps(_sanitized_race(argv[1] == "fixed")))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))


# -- probes of the lesson's statements, recorded by scripts/record_extras.py -----------------------------------------
