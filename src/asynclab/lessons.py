"""The lesson map and each notebook's first cell: what runs live on this machine and what replays a reference."""
from __future__ import annotations

from dataclasses import dataclass

from asynclab import hardware


@dataclass(frozen=True)
class Lesson:
    """One notebook of the course."""

    number: str
    slug: str
    title: str
    gpus: int  # GPUs its live experiments need (0: runs anywhere)
    reference_gpu: str | None  # where its reference was recorded
    ready: bool  # False while the notebook is still being written

    @property
    def notebook(self) -> str:
        return f"{self.number}_{self.slug}.ipynb"


LESSONS = (
    Lesson("00", "welcome", "Welcome: how the course works and how to read a timeline", 0, None, True),
    Lesson("01", "async_dispatch", "Asynchronous dispatch: the host runs ahead", 1, "NVIDIA H100", False),
    Lesson("02", "timing", "Timing GPU code: wrong and right timers", 1, "NVIDIA H100", False),
    Lesson("03", "streams", "Streams: when kernels run side by side", 1, "NVIDIA H100", False),
    Lesson("04", "events", "Events: ordering work across streams and devices", 1, "NVIDIA H100", False),
    Lesson("05", "copy_overlap", "Copy overlap: pinned memory and copy engines", 1, "NVIDIA H100", False),
    Lesson("06", "multi_gpu_p2p", "Multi-GPU: peer-to-peer copies over NVLink", 2, "2x NVIDIA H200", False),
    Lesson("07", "pipeline_bubbles", "Pipeline bubbles: micro-batches on two GPUs", 2, "2x NVIDIA H200", False),
)


def lesson(number: str | int) -> Lesson:
    """Look a lesson up by number.

    Example:
        >>> lesson(1).slug
        'async_dispatch'
    """
    key = f"{int(number):02d}" if str(number).isdigit() else str(number)
    for item in LESSONS:
        if item.number == key:
            return item
    raise ValueError(f"no lesson {number!r}; the lessons are {', '.join(x.number for x in LESSONS)}")


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
        00  Welcome: how the course works and how to read a timeline       0  runs here
    """
    hw = hw or hardware.inventory()
    rows = [f"{'#':<3} {'lesson':<62} {'GPUs':>4}  on this machine"]
    for item in LESSONS:
        status = how_it_runs(item, hw) + ("" if item.ready else "  (notebook not written yet)")
        rows.append(f"{item.number:<3} {item.title:<62} {item.gpus:>4}  {status}")
    return "\n".join(rows)


@dataclass(frozen=True)
class LessonRun:
    """What a notebook's set-up cell decided: the hardware, and whether this lesson runs live."""

    lesson: Lesson
    hw: hardware.Hardware

    @property
    def live(self) -> bool:
        return self.lesson.gpus > 0 and self.hw.live(self.lesson.gpus)

    def __str__(self) -> str:
        return f"{hardware.report(self.hw)}\nlesson {self.lesson.number}: {how_it_runs(self.lesson, self.hw)}"


def start(number: str | int) -> LessonRun:
    """The first cell of every notebook: inspect the hardware and print the plan.

    Example:
        >>> run = start(0)  # doctest: +ELLIPSIS
        asynclab hardware report
        ...
        >>> run.lesson.slug
        'welcome'
    """
    run = LessonRun(lesson(number), hardware.inventory())
    print(run)
    return run
