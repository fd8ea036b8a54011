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

from asynclab.gpu import hardware

__all__ = ["LESSONS", "Lesson", "NO_PEER_ACCESS", "how_it_runs", "lesson", "lesson_map", "written"]

_HERE = Path(__file__).resolve().parents[1] / "lessons"
_PACKAGE = "asynclab.lessons"


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
        return f"{_PACKAGE}.{self.name}.{part}"

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
    Lesson("04", "events", "Events: ordering work across streams and devices", 1, "NVIDIA H100", True),
    Lesson("05", "copy_overlap", "Copy overlap: pinned memory and copy engines", 1, "NVIDIA H100", True),
    Lesson("06", "multi_gpu_p2p", "Multi-GPU: peer-to-peer copies over NVLink", 2, "2x NVIDIA H100", True),
    Lesson("07", "pipeline_bubbles", "Pipeline bubbles: micro-batches on two GPUs", 2, "2x NVIDIA H100", True),
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
        'replays the 2x NVIDIA H100 reference'
    """
    if item.gpus == 0:
        return "runs here"
    if hw.live(item.gpus):
        return f"runs live here, on {hw.named(item.gpus)}"
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
