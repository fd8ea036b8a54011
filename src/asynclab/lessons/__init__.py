"""The one registry of lessons (number, name, title, GPUs, where each part lives), the lesson map, and each notebook's first cell.

Every lesson has the same anatomy, found under its short name (``streams``):

- ``notebooks/NN_<name>.ipynb``, the notebook;
- ``asynclab/lessons/<name>/experiments.py``, its experiments (plain functions returning JSON-ready dicts, and ``run_all``);
- ``asynclab/lessons/<name>/exercises.py``, its exercise checkers (registered as ``"NN.<exercise>"``);
- ``asynclab/lessons/<name>/reference/``, its reference: traces, ``results.json`` and ``meta.json``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from asynclab import hardware

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Lesson:
    """One lesson of the course, and where each of its parts lives.

    Example:
        >>> item = lesson(3)
        >>> item.notebook, item.folder, item.module_name("experiments")
        ('03_streams.ipynb', '03_streams', 'asynclab.lessons.streams.experiments')
    """

    number: str
    name: str  # the one short name: notebook, package, reference folder
    title: str
    gpus: int  # GPUs its live experiments need (0: runs anywhere)
    reference_gpu: str | None  # where its reference is recorded (the lesson map says it before it exists)
    ready: bool  # False while the notebook is still being written

    @property
    def notebook(self) -> str:
        """The notebook's file name in ``notebooks/``."""
        return f"{self.number}_{self.name}.ipynb"

    @property
    def folder(self) -> str:
        """``NN_name``: how the lesson is named in file names (notebook, figures, reference folder)."""
        return f"{self.number}_{self.name}"

    @property
    def package_dir(self) -> Path:
        """The lesson's folder in the package: ``asynclab/lessons/<name>/``."""
        return _HERE / self.name

    @property
    def reference_dir(self) -> Path:
        """Where the lesson's packaged reference lives: ``asynclab/lessons/<name>/reference/``."""
        return self.package_dir / "reference"

    def module_name(self, part: str) -> str:
        """The dotted name of one part (``"experiments"`` or ``"exercises"``) of this lesson."""
        if part not in ("experiments", "exercises"):
            raise ValueError(f"a lesson's parts are 'experiments' and 'exercises', not {part!r}")
        return f"{__name__}.{self.name}.{part}"

    def has(self, part: str) -> bool:
        """True when this lesson has that part (lessons still being written may not).

        Example:
            >>> lesson(0).has("exercises"), lesson(0).has("experiments")
            (True, False)
        """
        return (self.package_dir / f"{part}.py").is_file()

    def module(self, part: str) -> ModuleType:
        """Import one part of this lesson; a clear error when the lesson does not have it yet.

        Example:
            >>> lesson(1).module("experiments").__name__
            'asynclab.lessons.async_dispatch.experiments'
        """
        if not self.has(part):
            have = ", ".join(x.number for x in LESSONS if x.has(part))
            raise ValueError(f"lesson {self.number} ({self.name}) has no {part} module yet; lessons with one: {have}")
        return importlib.import_module(self.module_name(part))


LESSONS = (
    Lesson("00", "welcome", "Welcome: how the course works and how to read a timeline", 0, None, True),
    Lesson("01", "async_dispatch", "Asynchronous dispatch: the host runs ahead", 1, "NVIDIA H100", True),
    Lesson("02", "timing", "Timing GPU code: wrong and right timers", 1, "NVIDIA H100", True),
    Lesson("03", "streams", "Streams: when kernels run side by side", 1, "NVIDIA H100", True),
    Lesson("04", "events", "Events: ordering work across streams and devices", 1, "NVIDIA H200", True),
    Lesson("05", "copy_overlap", "Copy overlap: pinned memory and copy engines", 1, "NVIDIA H200", True),
    Lesson("06", "multi_gpu_p2p", "Multi-GPU: peer-to-peer copies over NVLink", 2, "2x NVIDIA H200", True),
    Lesson("07", "pipeline_bubbles", "Pipeline bubbles: micro-batches on two GPUs", 2, "2x NVIDIA H200", True),
    Lesson("08", "your_step", "Your own training step: diagnose it, fix it, measure it", 1, "NVIDIA H100", True),
)


def lesson(number: str | int) -> Lesson:
    """Look a lesson up by number, short name or folder name.

    Example:
        >>> lesson(1).name, lesson("timing").number, lesson("03_streams").gpus
        ('async_dispatch', '02', 1)
    """
    key = str(number).strip()
    key = f"{int(key):02d}" if key.isdigit() else key
    for item in LESSONS:
        if key in (item.number, item.name, item.folder):
            return item
    raise ValueError(f"no lesson {number!r}; the lessons are {', '.join(x.folder for x in LESSONS)}")


def written() -> tuple[Lesson, ...]:
    """The lessons whose notebook is written (``ready``): what the launch links, the book and the classroom
    course are made from. A lesson still being written is in :data:`LESSONS` and the lesson map only.

    Example:
        >>> [item.number for item in written()][:3]
        ['00', '01', '02']
    """
    return tuple(item for item in LESSONS if item.ready)


def how_it_runs(item: Lesson, hw: hardware.Hardware) -> str:
    """One phrase: does this lesson run live here, or replay its reference?

    Example:
        >>> how_it_runs(lesson(6), hardware.Hardware(gpus=()))
        'replays the 2x NVIDIA H200 reference'
    """
    if item.gpus == 0:
        return "runs here"
    if hw.live(item.gpus):
        return "runs live on your GPU" + ("s" if item.gpus > 1 else "")
    return f"replays the {item.reference_gpu} reference"


def lesson_map(hw: hardware.Hardware | None = None) -> str:
    """The lesson map as a text table, with how each lesson runs on this machine.

    Example:
        >>> print(lesson_map(hardware.Hardware(gpus=())).splitlines()[1])
        00  Welcome: how the course works and how to read a timeline          0  runs here
    """
    hw = hw or hardware.inventory()
    rows = [f"{'#':<3} {'lesson':<62} {'GPUs':>4}  on this machine"]
    for item in LESSONS:
        status = how_it_runs(item, hw) + ("" if item.ready else "  (notebook not written yet)")
        rows.append(f"{item.number:<3} {item.title:<62} {item.gpus:>4}  {status}")
    return "\n".join(rows)


#: What changes on two GPUs that cannot reach each other's memory (PCIe machines, Kaggle's two T4s).
NO_PEER_ACCESS = ("no peer access between GPU 0 and GPU 1 here: a copy between them goes through host memory, "
                  "staged by the driver, so it is slower and its overlap can differ; the live cells run all the same "
                  "and print DIFFERS where they differ, and the NVLink figures are the reference's")


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
        from asynclab.launch import runtime_hint

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
    def device(self) -> str:
        """Where live experiments run: ``"cuda"`` when this lesson is live, else ``"cpu"``."""
        return "cuda" if self.live else "cpu"

    def _experiment(self, name: str) -> tuple[Callable[..., Any], dict[str, Any]]:
        module = self.lesson.module("experiments")
        if not hasattr(module, name):
            raise ValueError(f"lesson {self.lesson.number} has no experiment {name!r}")
        return getattr(module, name), dict(getattr(module, "CPU_KWARGS", {}).get(name, {}))

    def measure(self, name: str, **kwargs: Any) -> Any:
        """Run experiment ``name`` live on the GPU with the recorded sizes, or return None without one.

        Example:
            >>> LessonRun(lesson(1), hardware.Hardware()).measure("launch_overhead") is None
            True
        """
        if not self.live:
            return None
        fn, _ = self._experiment(name)
        return fn("cuda", **kwargs)

    def measure_cpu(self, name: str, **kwargs: Any) -> Any:
        """Run experiment ``name`` live on the CPU, at the small sizes that keep it to seconds.

        Example:
            >>> r = LessonRun(lesson(1), hardware.Hardware()).measure_cpu("cpu_is_synchronous", n=64, reps=2)
            >>> r["device"]
            'cpu'
        """
        import inspect

        fn, small = self._experiment(name)
        takes_device = next(iter(inspect.signature(fn).parameters), None) == "device"
        return fn("cpu", **{**small, **kwargs}) if takes_device else fn(**{**small, **kwargs})

    def reference(self, name: str) -> dict[str, Any]:
        """The figures of experiment ``name`` recorded in this lesson's reference.

        Example:
            >>> LessonRun(lesson(2), hardware.Hardware()).reference("timers_side_by_side")["n"]
            8192
        """
        from asynclab import reference

        results = reference.results(self.lesson.number)
        if name not in results:
            raise KeyError(f"lesson {self.lesson.number}'s reference has no experiment {name!r}; "
                           f"it has {', '.join(sorted(results))}")
        return results[name]

    def reference_trace(self, name: str):
        """The profiler trace ``name`` recorded with this lesson's reference, loaded as a Trace."""
        from asynclab import reference

        return reference.trace(self.lesson.number, name)

    @property
    def reference_gpu(self) -> str:
        """The GPU the reference was recorded on, e.g. ``"NVIDIA H100 80GB HBM3"``."""
        from asynclab import reference

        return reference.describe(self.lesson.number).removeprefix("reference recorded on ").split(",")[0]

    def trace_path(self, name: str) -> Path:
        """Where a live trace of this lesson goes: ``traces/<lesson>_<name>.json.gz`` beside the notebook."""
        folder = Path("traces")
        folder.mkdir(exist_ok=True)
        return folder / f"{self.lesson.number}_{name}.json.gz"

    def side_by_side(self, live: dict[str, Any] | None, ref: dict[str, Any],
                     rows: dict[str, tuple[str, Callable[[float], str]]]) -> str:
        """A table of figures: your GPU (when live) beside the reference.

        ``rows`` maps a label to ``(key, formatter)``.

        Example:
            >>> run = LessonRun(lesson(1), hardware.Hardware())
            >>> print(run.side_by_side(None, {"x_ms": 1.5}, {"x": ("x_ms", lambda v: f"{v} ms")}))
            figure  reference (NVIDIA H100 80GB HBM3)
            x       1.5 ms
        """
        head = ["figure"] + (["your GPU"] if live is not None else []) + [f"reference ({self.reference_gpu})"]
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
    from asynclab.simcuda import stand_in_for_cuda

    run = LessonRun(lesson(number), hardware.inventory())
    if run.simulates_exercises:
        stand_in_for_cuda(max(1, run.lesson.gpus))  # learner code may make streams and events in any cell
    print(run)
    return run
