"""Lesson 08 experiments: a realistic training step with four common mistakes, diagnosed and fixed one at a time."""
from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from asynclab.course.experiments import Experiment, ExperimentRun, dig, lesson_run_all
from asynclab.gpu.devices import dtype_name, native_half, sync

LESSON = "08"

#: The four mistakes of the step, each by the name of its fix, and the finding kind that names it.
FIX_OF_KIND = {"dataloader_stall": "workers", "pageable_copy": "pinned", "host_sync": "logging",
               "alloc_churn": "empty_cache"}
FIXES = tuple(FIX_OF_KIND.values())
#: The fixed loop prints the mean loss every LOG_EVERY steps (the step with the mistake logs every step).
LOG_EVERY = 50
#: A finding smaller than this share of the step is not worth a fix (the diagnosis' text view folds it too).
MIN_SHARE = 0.02
#: Worker processes of the fixed loader (fewer where the machine has fewer cores).
WORKERS = 4

#: Sizes that keep every experiment to a few seconds on a 2-core CPU (the notebooks' and tests' CPU runs).
CPU_KWARGS: dict[str, dict[str, Any]] = {
    "fix_one_at_a_time": {"batch": 8, "size": 32, "steps": 2},
}


class Images(torch.utils.data.Dataset):
    """Images made on the CPU as a JPEG decoder and its augmentations make them: a random ``size + 8`` square
    image of bytes, cut to ``size`` at a random place and flipped every other time; the label is ``i % classes``.

    Example:
        >>> x, y = Images(size=32)[3]
        >>> tuple(x.shape), x.dtype, y
        ((3, 32, 32), torch.uint8, 3)
    """

    def __init__(self, n: int = 1_000_000, size: int = 96, classes: int = 100):
        self.n, self.size, self.classes = n, size, classes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        img = torch.randint(0, 256, (3, self.size + 8, self.size + 8), dtype=torch.uint8, generator=g)
        top, left = torch.randint(0, 9, (2,), generator=g).tolist()
        img = img[:, top:top + self.size, left:left + self.size]
        return (img.flip(-1) if i % 2 else img).contiguous(), i % self.classes


def make_loader(fixes: Iterable[str] = (), batch: int = 256, size: int = 96, workers: int | None = None):
    """The training data: ``Images`` in batches; with the "workers" fix loaded in worker processes, with
    "pinned" into pinned memory.

    Example:
        >>> x, y = next(iter(make_loader(batch=4, size=32)))
        >>> tuple(x.shape)
        (4, 3, 32, 32)
    """
    fixes = set(fixes)
    n = min(workers or WORKERS, os.cpu_count() or 1) if "workers" in fixes else 0
    return torch.utils.data.DataLoader(Images(size=size), batch_size=batch, shuffle=False, num_workers=n,
                                       pin_memory="pinned" in fixes and torch.cuda.is_available(),
                                       persistent_workers=n > 0, prefetch_factor=4 if n else None)


class TrainingLoop:
    """A ResNet-18 (torchvision) trained with AMP on :class:`Images`: ``step()`` runs one training step.

    Without fixes the step has the four mistakes of the lesson: the loader runs in the training process
    (``num_workers=0``), batches are copied from pageable memory with a blocking copy, the logging line reads the
    loss every step, and ``torch.cuda.empty_cache()`` runs after every step. Each fix in ``fixes`` removes one:
    "workers", "pinned", "logging", "empty_cache".

    Example:
        >>> loop = TrainingLoop("cpu", batch=4, size=32)
        >>> loop.step(); len(loop.log)
        1
    """

    def __init__(self, device: Any, fixes: Iterable[str] = (), batch: int = 256, size: int = 96):
        import torchvision

        self.dev, self.fixes = torch.device(device), frozenset(fixes)
        self.model = torchvision.models.resnet18(num_classes=100).to(self.dev)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.half = native_half(self.dev)
        self.scaler = torch.amp.GradScaler(self.dev.type, enabled=self.half == torch.float16)
        self.batches = iter(make_loader(self.fixes, batch, size))
        self.log: list[str] = []
        self.steps, self.loss_sum = 0, torch.zeros((), device=self.dev)

    def step(self) -> None:
        x, y = next(self.batches)
        if "pinned" in self.fixes:
            x, y = x.to(self.dev, non_blocking=True), y.to(self.dev, non_blocking=True)
        else:
            x, y = x.to(self.dev), y.to(self.dev)  # mistake: pageable memory, a copy that blocks
        x = (x.float() - 127.5) / 64.0
        with torch.autocast(self.dev.type, dtype=self.half, enabled=self.dev.type == "cuda"):
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad(set_to_none=True)
        self.steps += 1
        if "logging" in self.fixes:
            self.loss_sum += loss.detach()
            if self.steps % LOG_EVERY == 0:  # one read every LOG_EVERY steps
                self.log.append(f"step {self.steps}: loss {self.loss_sum.item() / LOG_EVERY:.4f}")
                self.loss_sum.zero_()
        else:
            self.log.append(f"step {self.steps}: loss {loss.item():.4f}")  # mistake: a read every step
        if "empty_cache" not in self.fixes and self.dev.type == "cuda":
            torch.cuda.empty_cache()  # mistake: memory handed back, and asked for again next step


def _timed_ms(step: Callable[[], None], dev: torch.device, steps: int, repeats: int = 3) -> float:
    """Median over ``repeats`` of the mean time of ``steps`` steps, the GPU finished at both ends."""
    times = []
    for _ in range(repeats):
        sync(dev)
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync(dev)
        times.append((time.perf_counter() - t0) * 1e3 / steps)
    return statistics.median(times)


def step_time(device: Any = None, fixes: Iterable[str] = (), batch: int = 256, size: int = 96, steps: int = 12,
              trace_path: Any = None) -> dict[str, Any]:
    """Measure the training step with ``fixes`` applied: its time without the profiler (warmed up), and, with
    ``trace_path`` on a GPU, three steps recorded with Python stacks and diagnosed.

    Returns ``{"fixes", "step_ms", "batch", "size", "dtype", "device", "peak_gib", "diagnosis"}``: ``peak_gib`` is
    the most GPU memory the step held (0 on the CPU), the diagnosis :meth:`asynclab.trace.analysis.diagnose.Diagnosis.as_dict`
    (None without a trace).

    Example:
        >>> r = step_time("cpu", batch=4, size=32, steps=1)
        >>> r["step_ms"] > 0 and r["diagnosis"] is None
        True
    """
    from asynclab.gpu.devices import resolve_device

    dev = resolve_device(device)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    loop = TrainingLoop(dev, fixes, batch, size)
    for _ in range(3 if dev.type == "cuda" else 1):
        loop.step()
    ms = _timed_ms(loop.step, dev, steps)
    diagnosis = None
    if trace_path is not None and dev.type == "cuda":
        from asynclab.trace.analysis.diagnose import diagnose
        from asynclab.gpu.record import record

        diagnosis = diagnose(record(loop.step, path=trace_path, warmup=0, steps=3, with_stack=True)).as_dict()
        diagnosis["trace"] = Path(trace_path).name
    peak = torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else 0.0
    return {"fixes": sorted(set(fixes)), "step_ms": ms, "batch": batch, "size": size,
            "dtype": dtype_name(loop.half), "device": str(dev), "peak_gib": peak, "diagnosis": diagnosis}


def next_fix(diagnosis: dict[str, Any] | None, done: Iterable[str]) -> str | None:
    """The fix for the largest finding of ``diagnosis`` that has a fix in this loop and is not done yet (at least
    :data:`MIN_SHARE` of the step), or None.

    Example:
        >>> next_fix({"findings": [{"kind": "launch_bound", "share": 0.5}, {"kind": "host_sync", "share": 0.1}]}, [])
        'logging'
    """
    for f in (diagnosis or {}).get("findings", []):
        fix = FIX_OF_KIND.get(f["kind"])
        if fix and fix not in done and f["share"] >= MIN_SHARE:
            return fix
    return None


def fix_one_at_a_time(device: Any = None, trace_dir: Any = None, batch: int = 256, size: int = 96,
                      steps: int = 12) -> dict[str, Any]:
    """Diagnose the step, fix what the diagnosis ranks first, measure, and again, until no finding with a fix is
    left; on the CPU (no diagnosis) only the step with every mistake and the step with every fix are measured.

    Returns ``{"stages": [step_time results, each with "fixed" (the fix it added) and "predicted_ms" (what the
    diagnosis before it said that fix would save per step)], "device"}``; the traces are ``stage<N>.json.gz``.

    Example:
        >>> r = fix_one_at_a_time("cpu", batch=4, size=32, steps=1)
        >>> [s["fixes"] for s in r["stages"]]
        [[], ['empty_cache', 'logging', 'pinned', 'workers']]
    """
    from asynclab.gpu.devices import resolve_device

    dev = resolve_device(device)
    out = Path(trace_dir) if trace_dir is not None else None
    done: list[str] = []
    stages = [step_time(dev, done, batch, size, steps, out / "stage0.json.gz" if out else None)]
    stages[0].update(fixed=None, predicted_ms=None)
    while dev.type == "cuda" and out is not None:
        fix = next_fix(stages[-1]["diagnosis"], done)
        if fix is None:
            break
        kind = next(k for k, v in FIX_OF_KIND.items() if v == fix)
        predicted = next(f["lost_ms_per_step"] for f in stages[-1]["diagnosis"]["findings"] if f["kind"] == kind)
        done.append(fix)
        stages.append(step_time(dev, done, batch, size, steps, out / f"stage{len(stages)}.json.gz"))
        stages[-1].update(fixed=fix, predicted_ms=predicted)
    if dev.type != "cuda":
        stages.append(step_time(dev, FIXES, batch, size, steps))
        stages[-1].update(fixed="all", predicted_ms=None)
        return {"stages": stages, "device": str(dev),
                "note": "no CUDA GPU: the step was timed with every mistake and with every fix, not diagnosed"}
    return {"stages": stages, "device": str(dev)}


def largest(findings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The finding that loses the largest share of the step (a diagnosis lists a fix that needs another after it,
    whatever its share), or None.

    Example:
        >>> largest([{"kind": "alloc_churn", "share": 0.14}, {"kind": "launch_bound", "share": 0.15}])["kind"]
        'launch_bound'
    """
    return max(findings, key=lambda f: f["share"], default=None)


def stage_table(stages: list[dict[str, Any]]) -> str:
    """The stages of :func:`fix_one_at_a_time` as a table: the fix each added, the step time (measured without the
    profiler) and the step the diagnosis replayed from the stage's trace, what the fix saved (measured) and what the
    diagnosis before it predicted, and the largest finding left.

    Example:
        >>> print(stage_table([{"fixed": None, "step_ms": 80.0, "predicted_ms": None, "diagnosis": None},
        ...                    {"fixed": "workers", "step_ms": 25.0, "predicted_ms": 50.0,
        ...                     "diagnosis": {"step_ms": 27.0, "findings": []}}]))
        stage  fix added  step     replayed  saved    predicted  largest finding left
        0      -          80.0 ms  -         -        -          -
        1      workers    25.0 ms  27.0 ms   55.0 ms  50.0 ms    -
    """
    rows = [("stage", "fix added", "step", "replayed", "saved", "predicted", "largest finding left")]
    for i, st in enumerate(stages):
        saved = f"{stages[i - 1]['step_ms'] - st['step_ms']:.1f} ms" if i else "-"
        top = largest((st.get("diagnosis") or {}).get("findings") or [])
        left = f"{top['kind']} {100 * top['share']:.0f}%" if top else "-"
        pred = f"{st['predicted_ms']:.1f} ms" if st.get("predicted_ms") is not None else "-"
        replayed = (st.get("diagnosis") or {}).get("step_ms")
        rows.append((str(i), st["fixed"] or "-", f"{st['step_ms']:.1f} ms",
                     f"{replayed:.1f} ms" if replayed is not None else "-", saved, pred, left))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)


def prediction_misses(stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each fix after the first stage: what the diagnosis predicted it would save, what it saved (measured), and
    how far the replayed steps of the stages before and after it were from their measured steps (ms), whose sum is
    what two runs of the step told apart by more than the fix can add to a prediction's miss.

    Example:
        >>> prediction_misses([{"fixed": None, "step_ms": 80.0, "diagnosis": {"step_ms": 84.0}},
        ...                    {"fixed": "workers", "step_ms": 25.0, "predicted_ms": 50.0,
        ...                     "diagnosis": {"step_ms": 27.0}}])
        [{'fix': 'workers', 'predicted_ms': 50.0, 'saved_ms': 55.0, 'runs_differ_ms': 6.0}]
    """
    out = []
    for before, st in zip(stages, stages[1:]):
        differ = sum(abs(x["diagnosis"]["step_ms"] - x["step_ms"]) for x in (before, st))
        out.append({"fix": st["fixed"], "predicted_ms": st["predicted_ms"],
                    "saved_ms": before["step_ms"] - st["step_ms"], "runs_differ_ms": differ})
    return out


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The figures lesson 08's claims rest on: the step with its mistakes and after the fixes, the first fix with
    what it saved and what the diagnosis predicted, and the largest finding left (None where not measured).

    Example:
        >>> headline({"fix_one_at_a_time": {"stages": [
        ...     {"step_ms": 80.0, "fixed": None, "predicted_ms": None, "diagnosis": None},
        ...     {"step_ms": 25.0, "fixed": "workers", "predicted_ms": 50.0, "diagnosis": {"findings": []}}]}})["first_fix"]
        'workers'
    """
    stages = dig(results, "fix_one_at_a_time", "stages") or []
    first = stages[1] if len(stages) > 1 else {}
    left = largest(dig(stages[-1], "diagnosis", "findings") or []) if stages else None
    return {
        "step_ms_with_mistakes": stages[0]["step_ms"] if stages else None,
        "step_ms_fixed": stages[-1]["step_ms"] if len(stages) > 1 else None,
        "first_fix": first.get("fixed"),
        "first_fix_saved_ms": stages[0]["step_ms"] - first["step_ms"] if first else None,
        "first_fix_predicted_ms": first.get("predicted_ms"),
        "largest_left": left["kind"] if left else None,
    }


def rediagnose(results: dict[str, Any], folder: Any) -> dict[str, Any]:
    """``results`` of :func:`fix_one_at_a_time` with each stage's diagnosis made again from its trace in ``folder``
    by this checkout's :func:`asynclab.trace.analysis.diagnose.diagnose`, each stage's ``predicted_ms`` read again from the
    diagnosis before it, and the headline again. The measured step times stay: a recording's figures as today's
    diagnosis reads its traces. Raises ValueError where that diagnosis would have ranked another fix first, so
    that the recorded stages no longer follow it (record the reference again).

    Example:
        >>> from asynclab.course import reference
        >>> again = rediagnose(reference.results(8), reference.lesson_dir(8))
        >>> again["headline"]["first_fix"], again["fix_one_at_a_time"]["stages"][1]["predicted_ms"] > 0
        ('workers', True)
    """
    from asynclab.trace.analysis.diagnose import diagnose

    out = json.loads(json.dumps(results))
    stages = out["fix_one_at_a_time"]["stages"]
    done: list[str] = []
    for i, st in enumerate(stages):
        if st.get("diagnosis") is None:
            continue
        name = st["diagnosis"]["trace"]
        st["diagnosis"] = {**diagnose(Path(folder) / name).as_dict(), "trace": name}
        then = stages[i + 1]["fixed"] if i + 1 < len(stages) else None
        if next_fix(st["diagnosis"], done) != then:
            raise ValueError(f"stage {i}: the diagnosis now ranks {next_fix(st['diagnosis'], done)!r} first, the "
                             f"recording applied {then!r} next: record the reference again")
        if then is not None:
            kind = next(k for k, v in FIX_OF_KIND.items() if v == then)
            stages[i + 1]["predicted_ms"] = next(f["lost_ms_per_step"] for f in st["diagnosis"]["findings"]
                                                 if f["kind"] == kind)
            done.append(then)
    out["headline"] = headline(out)
    return out


def _fix_one_at_a_time(run: ExperimentRun, **sizes: Any) -> dict[str, Any]:
    """:func:`fix_one_at_a_time`, which writes its stages' traces (``stage<N>``) into the trace folder itself."""
    out = run.traces.folder(needs=0)
    result = fix_one_at_a_time(run.device, out, **sizes)
    for path in sorted(out.glob("stage*.json.gz")) if out is not None else []:
        run.traces.add(path.name.removesuffix(".json.gz"), path)
    return result


#: Lesson 08's experiment, as ``run_all`` runs it: its key in the results, its function, the traces it writes
#: (<trace_dir>/stage<N>.json.gz, one per stage) and how many GPUs they need (0: the CPU records them too).
EXPERIMENTS: list[Experiment] = [
    Experiment("fix_one_at_a_time", _fix_one_at_a_time, "stage*", gpus=0, custom=True),
]

run_all = lesson_run_all(LESSON, EXPERIMENTS, CPU_KWARGS, headline)
