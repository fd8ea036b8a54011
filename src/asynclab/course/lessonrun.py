"""A lesson in its notebook: what the set-up cell decided (the hardware, live or replayed), its references and live measurements."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch  # noqa: F401 - the doctests' tensors

from asynclab.gpu import hardware
from asynclab.course.registry import NO_PEER_ACCESS, Lesson, how_it_runs, lesson

__all__ = ["LessonRun", "start", "NO_PEER_ACCESS"]


@dataclass(frozen=True)
class LessonRun:
    """What a notebook's set-up cell decided: the hardware, and whether this lesson runs live."""

    lesson: Lesson
    hw: hardware.Hardware

    @property
    def live(self) -> bool:
        return self.lesson.gpus > 0 and self.hw.live(self.lesson.gpus)

    def __str__(self) -> str:
        text = f"{hardware.report(self.hw)}\nlesson {self.lesson.number}: {how_it_runs(self.lesson, self.hw)}"
        from asynclab.course.launch import runtime_hint

        hint = runtime_hint(self.lesson.gpus, len(self.hw.gpus))
        if hint:
            text += f"\n{hint}"
        if self.live and not self.peer_access:
            text += f"\n{NO_PEER_ACCESS}"
        if self.simulates_exercises and self.lesson.has("exercises"):
            text += ("\nexercises: torch.cuda's streams, events and devices stand in for a GPU in this notebook, "
                     "and each check runs your code on a simulated GPU")
        return text

    @property
    def simulates_exercises(self) -> bool:
        """True when learner code runs on stand-ins for torch.cuda: no GPU here, or fewer than a two-GPU lesson needs.

        Example:
            >>> one = hardware.Hardware(gpus=(hardware.GPU(0, "T4", 15.0, 40, "7.5"),))
            >>> LessonRun(lesson(6), one).simulates_exercises, LessonRun(lesson(3), one).simulates_exercises
            (True, False)
        """
        return not self.hw.gpus or (self.lesson.gpus > 1 and not self.live)

    @property
    def peer_access(self) -> bool:
        """True when GPU 0 and GPU 1 reach each other's memory directly (or the lesson needs fewer than two).

        Example:
            >>> g = hardware.GPU(0, "T4", 15.0, 40, "7.5")
            >>> LessonRun(lesson(6), hardware.Hardware(gpus=(g, g), p2p=((True, False), (False, True)))).peer_access
            False
        """
        if self.lesson.gpus < 2 or len(self.hw.gpus) < 2:
            return True
        return bool(self.hw.p2p) and self.hw.p2p[0][1] and self.hw.p2p[1][0]

    @property
    def where(self) -> str:
        """Where this lesson's live runs are measured, as an output line names it: ``"live on NVIDIA H200"`` (``"live
        on 2x NVIDIA H200"`` for a two-GPU lesson), or ``"not live here"``.

        Example:
            >>> g = hardware.GPU(0, "NVIDIA H200", 140.0, 132, "9.0")
            >>> LessonRun(lesson(3), hardware.Hardware(gpus=(g,))).where, LessonRun(lesson(3), hardware.Hardware()).where
            ('live on NVIDIA H200', 'not live here')
        """
        return f"live on {self.hw.named(self.lesson.gpus)}" if self.live else "not live here"

    @property
    def device(self) -> str:
        """Where live experiments run: ``"cuda"`` when this lesson is live, else ``"cpu"``."""
        return "cuda" if self.live else "cpu"

    def _experiment(self, name: str) -> tuple[Callable[..., Any], dict[str, Any]]:
        module = self.lesson.module("experiments")
        if not hasattr(module, name):
            raise ValueError(f"lesson {self.lesson.number} has no experiment {name!r}")
        return getattr(module, name), dict(getattr(module, "CPU_KWARGS", {}).get(name, {}))

    def measure(self, what: Any, setup: Callable[[], Any] | None = None, *, name: str | None = None,
                repeats: int = 5, warmup: int = 1, values: bool = False, gpus: int | None = None,
                **kwargs: Any) -> Any:
        """Time and trace the code of an experiment cell: ``what`` is a function, or ``{name: function}``, of the
        PyTorch lines to measure, each taking ``setup()``'s result when a ``setup`` is given. It runs live on this
        machine's GPU when the lesson runs live, else on the simulated card of the cell's recording (its times
        predicted), and returns a :class:`asynclab.course.cells.Measured` that shows the recording made from the same
        cell (``name``) beside it. ``values=True`` computes values in the simulation (slower), for code whose result
        the cell reads. ``gpus`` is how many GPUs the code uses, where a cell needs more than its lesson (a
        two-GPU cell of a one-GPU lesson): it runs live only where this machine has that many, else on that many
        simulated cards.

        With ``what`` a string, the packaged experiment of that name runs live with the recorded sizes (None
        without a GPU): the older form, for cells whose code is not yet on the page.

        Example:
            >>> run = LessonRun(lesson(5), hardware.Hardware())
            >>> def setup():
            ...     return torch.ones(4096, 4096, device="cuda")
            >>> def square(x):
            ...     x @ x
            >>> m = run.measure({"square": square}, setup, name="doc_square", repeats=2)
            >>> m.where, m.ms["square"] > 0
            ('simulated H100 (predicted)', True)
            >>> LessonRun(lesson(1), hardware.Hardware()).measure("launch_overhead") is None
            True
            >>> def on_gpu_1():
            ...     torch.ones(1024, device="cuda:1").mul_(2)
            >>> two = run.measure(on_gpu_1, name="doc_gpu_1", repeats=1, gpus=2)  # two simulated GPUs
            >>> two.where, two.trace.lanes()[0]
            ('simulated H100 (predicted)', 'GPU 1 · stream 7 (default)')
        """
        if isinstance(what, str):
            if not self.live:
                from asynclab.course.predictlog import log_refused

                log_refused(self.lesson.number, what, "an experiment run by name: it runs on a GPU only")
                return None
            fn, _ = self._experiment(what)
            return fn("cuda", **kwargs)
        if kwargs:
            raise TypeError(f"measure takes no parameter {sorted(kwargs)[0]!r} with code of your own: "
                            "put sizes in your setup function")
        if gpus is not None and not (isinstance(gpus, int) and 1 <= gpus <= 8):
            raise ValueError(f"gpus is how many GPUs the code uses, 1 to 8 (got {gpus!r})")
        return self._measure_cell(what, setup, name, repeats, warmup, values, gpus)

    def _measure_cell(self, what: Any, setup: Callable[[], Any] | None, name: str | None, repeats: int,
                      warmup: int, values: bool, gpus: int | None = None) -> Any:
        from asynclab.course import cells

        key = name or getattr(what, "__name__", None) or "cell"
        recording = cells.recorded(self.lesson.reference_dir, key)
        gpu = (recording or {}).get("gpu") or self.reference_gpu
        card = "H200" if "H200" in gpu else "H100"
        needs = max(1, self.lesson.gpus) if gpus is None else gpus
        live = self.live if gpus is None else self.hw.live(gpus)  # a two-GPU cell of a one-GPU lesson: live on two
        path = self.trace_path(f"cell_{key}") if live else None
        measured = cells.run_cell(what, setup, live=live, card=card, gpus=needs,
                                  repeats=repeats, warmup=warmup, values=values, path=path)
        measured.name, measured.lesson = key, self.lesson.number
        if measured.failed and not live:
            from asynclab.course.predictlog import log_refused

            log_refused(self.lesson.number, key, measured.failed)
        recording = self._kept(key, measured, recording) if live else recording
        measured.reference = recording
        measured.recording_trace = self.lesson.reference_dir / f"cell_{key}.json.gz"
        measured.same_code = bool(recording) and recording.get("fingerprint") == measured.code
        if recording is not None and not measured.same_code:
            measured.notes.append(f"(your code differs from the cell's original: the recording on {gpu} ran the original)")
        return measured

    def _kept(self, key: str, measured: Any, recording: dict[str, Any] | None) -> dict[str, Any] | None:
        """The recording of cell ``key`` after a live run: written from ``measured`` when ``ASYNCLAB_RECORD`` asks
        (``1``: every cell; ``stale``: a cell with no recording, or one of other code than the cell's), else as it was."""
        import os

        from asynclab.course import cells

        mode = os.environ.get(cells.RECORD_ENV)
        stale = recording is None or recording.get("fingerprint") != measured.code
        if not (mode == "1" or (mode == "stale" and stale)):
            return recording
        cells.write_recording(self.lesson.reference_dir, key, measured, self.hw.gpus[0].name)
        measured.notes.append("(this run is the cell's recording)")
        return cells.recorded(self.lesson.reference_dir, key)

    def query(self, fn: Callable[[], Any], *, name: str) -> Any:
        """Ask this machine something with the cell's own code: ``fn()`` (who reaches whom, the topology) runs when
        the lesson runs live, and its answer is kept under ``returned[fn.__name__]``. A query times nothing and
        queues no GPU work, so the simulated card has nothing to answer: without the lesson's GPUs nothing runs
        (``failed`` says so). It is recorded like :meth:`measure`'s cells (``ASYNCLAB_RECORD``, a fingerprint of
        ``fn``, no trace), and ``.recording()`` gives the answer on the GPUs the lesson was recorded on.

        Example:
            >>> def gpus():
            ...     return torch.cuda.device_count()
            >>> m = LessonRun(lesson(6), hardware.Hardware()).query(gpus, name="doc_gpus")
            >>> m.failed, m.reference
            ('needs 2 GPUs: none to ask here', None)
        """
        from asynclab.course import cells

        key, recording = getattr(fn, "__name__", "query"), cells.recorded(self.lesson.reference_dir, name)
        code = cells.fingerprint({key: fn}, None)
        if not self.live:
            measured = cells.Measured({}, {}, {}, None, "this machine", code,
                                      failed=f"needs {self.lesson.gpus} GPUs: none to ask here")
        else:
            measured = cells.Measured({}, {}, {key: fn()}, None, f"live on {self.hw.named(self.lesson.gpus)}", code)
            recording = self._kept(name, measured, recording)
        measured.reference, measured.same_code = recording, bool(recording) and recording.get("fingerprint") == code
        return measured

    def measure_cpu(self, name: str, **kwargs: Any) -> Any:
        """Run experiment ``name`` live on the CPU, at the small sizes that keep it to seconds.

        Example:
            >>> r = LessonRun(lesson(1), hardware.Hardware()).measure_cpu("cpu_is_synchronous", n=64, reps=2)
            >>> r["device"]
            'cpu'
        """

        fn, small = self._experiment(name)
        takes_device = next(iter(inspect.signature(fn).parameters), None) == "device"
        return fn("cpu", **{**small, **kwargs}) if takes_device else fn(**{**small, **kwargs})

    def explore(self, name: str, **kwargs: Any) -> dict[str, Any] | None:
        """Run experiment ``name`` with parameters of your own: live on the GPU when this lesson runs live, else on
        the simulated H100, its times predicted. The results say which under ``"where"``; a figure the simulation
        cannot give (values it does not compute) is None. Prints why, and returns None, where it cannot run.

        Example:
            >>> run = LessonRun(lesson(5), hardware.Hardware())
            >>> mine = run.explore("pipeline", chunks=4, chunk_bytes=8 << 20)
            >>> mine["where"], mine["chunks"], mine["serial_ms"] > mine["overlapped_ms"]
            ('simulated H100 (predicted)', 4, True)
        """
        fn, _ = self._experiment(name)
        takes = [p for p in inspect.signature(fn).parameters if p != "device"]
        unknown = sorted(set(kwargs) - set(takes))
        if unknown:
            raise TypeError(f"{name} takes no parameter {unknown[0]!r}; it takes {', '.join(takes)}")
        try:
            if self.live:
                return {**fn("cuda", **kwargs), "where": f"live on {self.hw.gpus[0].name}"}
            from asynclab.course.predicted import LABEL, VALUES, simulated, timed_only

            values = (self.lesson.number, name) in VALUES  # as the course's own predictions run it
            results, limit, _ = simulated(lambda: fn("cuda", **kwargs), gpus=max(1, self.lesson.gpus), values=values)
        except ValueError as err:  # a parameter out of range: the experiment's own message, without its machinery
            raise ValueError(f"{name}: {err}") from None
        if limit is not None:
            print(f"not predicted here: {name} {limit}")
            return None
        return {**(results if values else timed_only(results)), "where": LABEL}

    def answer(self, guess: Any, what: str, recorded: Any, unit: str = "ms", fmt: str = "{:.3g}",
               mine: Any = None, mine_where: str | None = None) -> str:
        """The answer to a prediction read from the reference: the learner's ``guess`` beside the ``recorded`` figure
        (and ``mine``, a figure of this machine, when given: ``mine_where`` says where it comes from, such as
        ``"simulated H100 (predicted)"``; by default the live GPU, or "measured here"), each labelled.

        Example:
            >>> run = LessonRun(lesson(2), hardware.Hardware())
            >>> print(run.answer(1.5, "one product", 1.41))
            one product
              your guess                                     1.5 ms
              recorded on NVIDIA H100 80GB HBM3 (reference)  1.41 ms
        """
        from asynclab.course.cells import answer_line

        def show(value: Any) -> str:
            return f"{fmt.format(value)} {unit}".strip() if isinstance(value, (int, float)) else str(value)

        default = f"live on {self.hw.gpus[0].name}" if self.live else "measured here"
        here = (mine_where or default, show(mine)) if mine is not None else None
        return answer_line(what, guess, here, (f"recorded on {self.reference_gpu} (reference)", show(recorded)), unit)

    def reference(self, name: str) -> dict[str, Any]:
        """The figures of experiment ``name`` recorded in this lesson's reference.

        Example:
            >>> LessonRun(lesson(2), hardware.Hardware()).reference("timers_side_by_side")["n"]
            8192
        """
        from asynclab.course import reference

        results = reference.results(self.lesson.number)
        if name not in results:
            raise KeyError(f"lesson {self.lesson.number}'s reference has no experiment {name!r}; "
                           f"it has {', '.join(sorted(results))}")
        return results[name]

    def reference_trace(self, name: str):
        """The profiler trace ``name`` recorded with this lesson's reference, loaded as a Trace; it carries the
        callouts the lesson's ``experiments.CALLOUTS`` names for it (the event each of its figures is about),
        which ``draw_timeline`` draws where that event is in the window.

        Example:
            >>> run = LessonRun(lesson(3), hardware.Hardware())
            >>> run.reference_trace("missing_wait").meta["callouts"]  # doctest: +SKIP
            [('MulFunctor', 'y = x * 2, on the side stream')]
        """
        from asynclab.course import reference

        trace = reference.trace(self.lesson.number, name)
        if self.lesson.has("experiments"):
            callouts = getattr(self.lesson.module("experiments"), "CALLOUTS", {}).get(name)
            if callouts:
                trace.meta["callouts"] = list(callouts)
        return trace

    @property
    def reference_gpu(self) -> str:
        """The GPU the reference was recorded on, e.g. ``"NVIDIA H100 80GB HBM3"``."""
        from asynclab.course import reference

        return reference.describe(self.lesson.number).removeprefix("reference recorded on ").split(",")[0]

    def trace_path(self, name: str) -> Path:
        """Where a live trace of this lesson goes: ``traces/<lesson>_<name>.json.gz`` beside the notebook."""
        folder = Path("traces")
        folder.mkdir(exist_ok=True)
        return folder / f"{self.lesson.number}_{name}.json.gz"

    def side_by_side(self, live: dict[str, Any] | None, ref: dict[str, Any],
                     rows: dict[str, tuple[str, Callable[[float], str]]]) -> str:
        """A table of figures: this machine's GPU, by name (when live; or the simulated H100, for results of :meth:`explore` that say
        so under ``"where"``) beside the reference.

        ``rows`` maps a label to ``(key, formatter)``.

        Example:
            >>> run = LessonRun(lesson(1), hardware.Hardware())
            >>> print(run.side_by_side(None, {"x_ms": 1.5}, {"x": ("x_ms", lambda v: f"{v} ms")}))
            figure  reference (NVIDIA H100 80GB HBM3)
            x       1.5 ms
        """
        where = (live or {}).get("where", "")
        mine = f"live ({self.hw.named()})" if not where or where.startswith("live") else where
        head = ["figure"] + ([mine] if live is not None else []) + [f"reference ({self.reference_gpu})"]
        table = [head]
        for label, (key, fmt) in rows.items():
            cells = [label] + ([fmt(live[key])] if live is not None else []) + [fmt(ref[key])]
            table.append(cells)
        widths = [max(len(r[i]) for r in table) for i in range(len(head))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table)


def start(number: str | int) -> LessonRun:
    """The first cell of every notebook: inspect the hardware and print the plan.

    Example:
        >>> run = start(0)  # doctest: +ELLIPSIS
        asynclab hardware report
        ...
        >>> run.lesson.name
        'welcome'
    """
    from asynclab.sim.simulation import stand_in_for_cuda

    from asynclab.course.notebooks import sharp_figures

    sharp_figures()  # in a notebook: figures stay sharp zoomed in on a phone
    run = LessonRun(lesson(number), hardware.inventory())
    if run.simulates_exercises:
        stand_in_for_cuda(max(1, run.lesson.gpus))  # learner code may make streams and events in any cell
    print(run)
    return run
