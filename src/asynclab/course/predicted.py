"""Every lesson's experiments on the simulated H100 ("simulated H100 (predicted)"), beside its recorded reference."""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from asynclab.course import reference
from asynclab.course import registry
from asynclab.course.experiments import ExperimentRun, TraceFolder, dig
from asynclab.sim.limits import SimulationLimit
from asynclab.sim.simulate import simulate

__all__ = ["LABEL", "HEADLINE_FIGURES", "CLAIMS", "VALUES", "VALUE_FIGURES", "timed_only", "Prediction", "predict_one", "predict", "figure_rows",
           "claim_rows", "Claim"]

#: How every number of this module is labelled.
LABEL = "simulated H100 (predicted)"

#: Experiments whose results count wrong values: they run with values computed (slower); the others are timed only.
VALUES = {("03", "missing_wait"), ("04", "race"), ("04", "allocator_reuse"), ("05", "early_read"),
          ("05", "source_mutation")}
#: Experiments whose claims read figures from a profiler trace of their own: predicted with a folder for their traces
#: (the simulated GPU's, as torch.profiler would write them), which is deleted afterwards.
TRACED = {("05", "dataloader")}
#: Figures an experiment counts or compares from the tensors' values: an experiment timed only cannot give them (None).
VALUE_FIGURES = ("wrong_chunks", "wrong", "same_outputs")

#: The headline figures per lesson: (experiment, path into its results), the numbers the lesson's text and claims use.
HEADLINE_FIGURES: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "01": [("d2l_benchmark", ("big_synced_s",)), ("d2l_benchmark", ("torch_synced_s",)),
           ("host_runs_ahead", ("finish_ms",)), ("host_runs_ahead", ("enqueue_ms",)), ("host_runs_ahead", ("mm_ms",)),
           ("launch_overhead", ("eager_us_per_op",)), ("overhead_bound", ("flat_level_us",)),
           ("overhead_bound", ("flat_until",))],
    "02": [("warmup_cost", ("first_ms",)), ("warmup_cost", ("median_ms",)), ("timers_side_by_side", ("events_ms",)),
           ("timers_side_by_side", ("sync_ms",)), ("spread", ("median_ms",)),
           ("sync_every_iteration", ("per_call_synced_us",)), ("sync_every_iteration", ("per_call_batched_us",)),
           ("synchronize_scope", ("device_sync_ms",))],
    "03": [("branches", ("one_stream_ms",)), ("branches", ("speedup",)), ("spin_kernels", ("speedup",)),
           ("matmuls", ("big_one_ms",)), ("matmuls", ("big_speedup",)), ("matmuls", ("tiny_slowdown",)),
           ("tail_effect", ("tail_fill_speedup",)), ("parallel_module", ("small", "speedup")),
           ("stream_pool", ("normal_wait_ms",)), ("stream_pool", ("high_wait_ms",))],
    "04": [("event_api", ("elapsed_a_ms",)), ("event_api", ("synchronize_host_ms",)),
           ("event_timer_modes", ("elapsed_ms",))],
    "05": [("bidirectional", ("h2d_gbps",)), ("bidirectional", ("both_gbps",)), ("pin_cost", ("pageable_copy_ms",)),
           ("pin_cost", ("pinned_copy_ms",)), ("copy_streams", ("best_hidden_fraction",)),
           ("dataloader", ("plain", "step_ms")), ("dataloader", ("pinned", "step_ms"))],
    "06": [("latency", ("us_per_copy", 0)), ("latency", ("local_us_per_copy", 0))],
    "07": [("one_stage", ("ms",)), ("one_stage", ("forward_ms",)), ("naive", ("step_ms",)),
           ("asker", ("chunk_by_chunk", "step_ms")), ("asker", ("forwards_first", "step_ms")),
           ("gpipe", ("step_ms", 2)), ("gpipe", ("step_ms", 3)), ("gpipe", ("step_ms", 5)),
           ("memory", ("gpipe", "peak_gib", 0)), ("memory", ("1f1b", "peak_gib", 0)), ("memory", ("1f1b", "step_ms"))],
    "08": [("fix_one_at_a_time", ("stages", 0, "step_ms"))],
}


@dataclass(frozen=True)
class Claim:
    """One of a lesson's claims that its results alone decide: ``test(results of experiment)`` is True for PASS.

    Example:
        >>> Claim("03", "spin_kernels", "four spin kernels: 3.6x or more", lambda r: r["speedup"] >= 3.6).verdict(
        ...     {"speedup": 3.99})
        'PASS'
    """

    lesson: str
    experiment: str
    statement: str
    test: Callable[[dict], bool]

    def verdict(self, results: Any) -> str:
        """``"PASS"``, ``"DIFFERS"``, or ``"n/a"`` where the results lack what the claim reads."""
        try:
            passed = self.test(results)
        except (KeyError, TypeError, IndexError, ZeroDivisionError):
            return "n/a"
        return "n/a" if passed is None else "PASS" if passed else "DIFFERS"  # None: a figure the results lack


def _flat(r: dict) -> float:
    return r["flat_level_us"]


#: The notebooks' claims (``al.claim`` cells) that read one experiment's results only, as they state them.
CLAIMS = [
    Claim("01", "d2l_benchmark", "with 4096² matrices synced > 5x unsynced",
          lambda r: r["big_synced_s"] > 5 * r["big_unsynced_s"]),
    Claim("01", "d2l_benchmark", "at 1000² synced > 1.5x unsynced, but by far less than at 4096²",
          lambda r: 1.5 * r["torch_unsynced_s"] < r["torch_synced_s"]
          and r["torch_synced_s"] / r["torch_unsynced_s"] < r["big_synced_s"] / r["big_unsynced_s"] / 5),
    Claim("01", "d2l_benchmark", "synchronized, the GPU is more than 100x faster than numpy at 1000²",
          lambda r: r["numpy_s"] > 100 * r["torch_synced_s"]),
    Claim("01", "launch_overhead", "a CUDA graph costs at least 3x less per op than eager launches",
          lambda r: r["graph_us_per_op"] * 3 < r["eager_us_per_op"]),
    Claim("01", "overhead_bound", "the time per op stays flat over at least a 256-fold growth in size",
          lambda r: r["flat_until"] >= 256 * r["sizes"][0]),
    Claim("01", "overhead_bound", "the largest size takes over 10x the flat level",
          lambda r: r["us_per_op"][-1] > 10 * _flat(r)),
    Claim("02", "timers_side_by_side", "the naive timer reports under 5% of the event-timed work",
          lambda r: r["naive_ms"] < 0.05 * r["events_ms"]),
    Claim("02", "timers_side_by_side", "synchronize, events and torch.utils.benchmark agree within 25%",
          lambda r: max(r["sync_ms"], r["events_ms"], r["benchmark_ms"])
          < 1.25 * min(r["sync_ms"], r["events_ms"], r["benchmark_ms"])),
    Claim("02", "warmup_cost", "the first call costs more than 10x a steady call",
          lambda r: r["first_ms"] > 10 * r["median_ms"]),
    Claim("02", "spread", "max > p95 > median", lambda r: r["max_ms"] > r["p95"] > r["median_ms"]),
    Claim("02", "spread", "the mean sits above the median", lambda r: r["mean_ms"] > r["median_ms"]),
    Claim("02", "sync_every_iteration", "syncing around every call inflates the per-call time by more than 20%",
          lambda r: r["inflation"] > 1.2),
    Claim("02", "synchronize_scope", "a stream's synchronize waits for that stream only; the device's for every one",
          lambda r: r["current_stream_sync_ms"] < 0.1 * r["spin_ms"] and r["device_sync_ms"] > 0.9 * r["spin_ms"]),
    Claim("03", "branches", "on two streams the branches finish at least 1.5x sooner (the results' half)",
          lambda r: r["speedup"] >= 1.5),
    Claim("03", "missing_wait", "without the wait every element is wrong, both ways; with it none is",
          lambda r: r["input_wrong_unfixed"] == r["elements"] == r["output_wrong_unfixed"]
          and r["input_wrong_fixed"] == 0 == r["output_wrong_fixed"]),
    Claim("03", "spin_kernels", "four spin kernels run at least 3.6x faster on four streams",
          lambda r: r["speedup"] >= 3.6),
    Claim("03", "matmuls", "the big products gain nothing from streams (within 10%)",
          lambda r: 0.9 <= r["big_speedup"] <= 1.1),
    Claim("03", "matmuls", "the tiny products are slower on eight streams than on one", lambda r: r["tiny_slowdown"] > 1),
    Claim("03", "tail_effect", "a second stream filled A's tail: at least 1.3x faster",
          lambda r: r["tail_fill_speedup"] >= 1.3),
    Claim("03", "parallel_module", "Parallel speeds up the small branches at least 2x",
          lambda r: r["small"]["speedup"] >= 2),
    Claim("03", "parallel_module", "Parallel does not speed up branches that fill the GPU (at most 1.1x)",
          lambda r: r["big"]["speedup"] <= 1.1),
    Claim("03", "parallel_module", "Parallel gives the outputs of the branches run in turn, on both workloads",
          lambda r: None if None in (r["small"]["same_outputs"], r["big"]["same_outputs"])
          else r["small"]["same_outputs"] and r["big"]["same_outputs"]),
    Claim("03", "stream_pool", "a high-priority stream's kernel waits under a quarter of the normal wait",
          lambda r: r["high_wait_ms"] < 0.25 * r["normal_wait_ms"]),
    Claim("04", "event_api", "query() says False while spin A runs and True once it is done",
          lambda r: r["query_false_polls"] >= 1 and r["query_true_after_ms"] >= 0.9 * r["elapsed_a_ms"]),
    Claim("04", "event_api", "wait_event costs the host microseconds; synchronize blocks it for most of spin B",
          lambda r: r["wait_event_host_ms"] < 0.01 * r["synchronize_host_ms"]
          and r["synchronize_host_ms"] > 0.5 * r["elapsed_b_ms"]),
    Claim("04", "race", "without a wait every element is wrong; with wait_event or synchronize none is",
          lambda r: r["no wait"]["wrong"] == r["elements"] and r["wait_event"]["wrong"] == 0
          and r["synchronize"]["wrong"] == 0),
    Claim("04", "event_timer_modes", "a blocking event's wait uses under a tenth of the spinning wait's CPU time",
          lambda r: r["blocking"]["cpu_ms"] < 0.1 * r["spin"]["cpu_ms"]),
    Claim("05", "bidirectional", "both directions at once move more than 1.5x one direction's bandwidth",
          lambda r: r["both_gbps"] > 1.5 * max(r["h2d_gbps"], r["d2h_gbps"])),
    Claim("05", "pin_cost", "pin into a fresh block + pinned copy is slower than a pageable copy",
          lambda r: r["pin_fresh_ms"] + r["pinned_copy_ms"] > r["pageable_copy_ms"]),
    Claim("05", "pin_cost", "pinning into a cached block costs less than the copy time it saves",
          lambda r: r["pin_cached_ms"] < r["saved_ms"]),
    Claim("05", "early_read", "reading before the copy lands gives another step's numbers, every element",
          lambda r: r["no sync"]["wrong"] == r["n"] and r["to(cpu) no sync"]["wrong"] == r["n"]),
    Claim("05", "early_read", "after synchronizing on an event recorded after the copy, every value is right",
          lambda r: r["event sync"]["wrong"] == 0),
    Claim("05", "source_mutation", "refilling the pinned source right after a non_blocking copy sends the new batch",
          lambda r: r["unfixed"]["wrong"] == r["n"] and r["fixed"]["wrong"] == 0),
    Claim("05", "dataloader", "the pinned loader's steps are faster, with less GPU idle time",
          lambda r: r["pinned"]["step_ms"] < r["plain"]["step_ms"]
          and r["pinned"]["idle_ms_per_step"] < r["plain"]["idle_ms_per_step"]),
    Claim("07", "naive", "each GPU is busy for at most 60% of the step", lambda r: max(r["busy_share"]) <= 0.6),
    Claim("07", "gpipe", "past some m, more micro-batches make the step slower",
          lambda r: r["step_ms"][-1] > min(r["step_ms"])),
    Claim("07", "memory", "by hand, 1F1B is slower than by-hand GPipe (1.2x or more)",
          lambda r: r["1f1b"]["step_ms"] >= 1.2 * r["gpipe"]["step_ms"]),
]


@dataclass
class Prediction:
    """One experiment on the simulated H100: its ``results`` (None where it could not run, ``limit`` says why) and
    how many seconds the simulation took on this machine.

    Example:
        >>> Prediction("01", "async_error", None, "a subprocess", 0.1).ran
        False
    """

    lesson: str
    key: str
    results: Any
    limit: str | None = None
    seconds: float = 0.0
    label: str = field(default=LABEL)

    @property
    def ran(self) -> bool:
        """True when the experiment ran on the simulated GPU."""
        return self.limit is None


def _where(err: BaseException) -> str:
    """`` (in <package>)``: the package outside the course and torch whose code reached the refused call, if any."""
    import traceback

    names = [f.filename for f in traceback.extract_tb(err.__traceback__)]
    outside = [n for n in names if "site-packages" in n and "/torch/" not in n]
    return f" (in {outside[-1].split('site-packages/')[-1].split('/')[0]})" if outside else ""


def predict_one(lesson: str | int, key: str, values: bool | None = None) -> Prediction:
    """Run one experiment of a lesson's ``EXPERIMENTS`` on the simulated H100 (two for a two-GPU lesson), on
    device ``"cuda"``, with its GPU sizes; ``values`` (default: :data:`VALUES`) computes the tensors' values.

    Example:
        >>> predict_one(1, "host_runs_ahead").results["n"]  # doctest: +SKIP
        8192
    """
    item = registry.lesson(lesson)
    row = next((r for r in item.module("experiments").EXPERIMENTS if r.key == key), None)
    if row is None:
        raise ValueError(f"lesson {item.number} has no experiment {key!r}")
    values = (item.number, key) in VALUES if values is None else values
    with tempfile.TemporaryDirectory(prefix="asynclab_predicted_") as tmp:
        traces = TraceFolder(Path(tmp) if (item.number, key) in TRACED else None, gpu=True)
        results, limit, seconds = simulated(lambda: row.run(ExperimentRun(torch.device("cuda"), traces, False, {})),
                                            gpus=min(2, max(1, row.gpus, item.gpus)), values=values)
    return Prediction(item.number, key, results if values else timed_only(results), limit, seconds)


def timed_only(results: Any) -> Any:
    """``results`` of a run that computed no values: the figures counted or compared from values
    (:data:`VALUE_FIGURES`), at any depth, None.

    Example:
        >>> timed_only({"small": {"speedup": 4.0, "same_outputs": False}, "wrong": 0})
        {'small': {'speedup': 4.0, 'same_outputs': None}, 'wrong': None}
    """
    if isinstance(results, dict):
        return {k: None if k in VALUE_FIGURES else timed_only(v) for k, v in results.items()}
    return results


def simulated(call: Callable[[], Any], gpus: int = 1, values: bool = False) -> tuple[Any, str | None, float]:
    """Run ``call()`` on the simulated H100 (``gpus`` of them), with what it does not cover refused: returns
    ``(what it returned, None, seconds)``, or ``(None, why it could not run there, seconds)``.

    Example:
        >>> results, limit, _ = simulated(lambda: torch.ones(4, device="cuda").sum().item(), values=True)
        >>> results, limit
        (4.0, None)
    """
    box: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        simulate(lambda: box.setdefault("results", call()), gpus=gpus, values=values)
    except SimulationLimit as err:
        return None, f"the simulation refuses {err.call}{_where(err)}", time.perf_counter() - t0
    except ValueError as err:
        if "nothing ran" not in str(err):
            raise
        return None, "runs nothing on the GPU (a CPU experiment)", time.perf_counter() - t0
    return box.get("results"), None, time.perf_counter() - t0


def predict(lesson: str | int, keys: list[str] | None = None) -> dict[str, Prediction]:
    """Every experiment of a lesson (or those of ``keys``) on the simulated H100, by key; an experiment that
    fails otherwise is a :class:`Prediction` whose ``limit`` names the error.

    Example:
        >>> sorted(predict(3, ["spin_kernels"]))  # doctest: +SKIP
        ['spin_kernels']
    """
    item = registry.lesson(lesson)
    out = {}
    for row in item.module("experiments").EXPERIMENTS:
        if keys is not None and row.key not in keys:
            continue
        try:
            out[row.key] = predict_one(item.number, row.key)
        except Exception as err:  # noqa: BLE001 - listed with its reason, not hidden
            first = str(err).strip().splitlines()[0][:100] if str(err).strip() else ""
            out[row.key] = Prediction(item.number, row.key, None,
                                      f"fails in the simulation{_where(err)}: {type(err).__name__}: {first}")
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def figure_rows(lesson: str | int, predictions: dict[str, Prediction]) -> list[dict[str, Any]]:
    """The lesson's headline figures (:data:`HEADLINE_FIGURES`) of the experiments predicted: predicted, recorded, ratio.

    Example:
        >>> p = {"spin_kernels": Prediction("03", "spin_kernels", {"speedup": 4.0})}
        >>> [(r["figure"], r["predicted"]) for r in figure_rows(3, p)]
        [('speedup', 4.0)]
    """
    item = registry.lesson(lesson)
    ref = reference.results(item.number)
    rows = []
    for key, path in HEADLINE_FIGURES.get(item.number, []):
        if key not in predictions:
            continue
        pred = predictions[key]
        predicted = _number(dig(pred.results, *path)) if pred.ran else None
        recorded = _number(dig(ref, key, *path))
        ratio = predicted / recorded if predicted is not None and recorded else None
        rows.append({"lesson": item.number, "experiment": key, "figure": ".".join(map(str, path)), "predicted": predicted,
                     "recorded": recorded, "ratio": ratio, "limit": pred.limit})
    return rows


def claim_rows(lesson: str | int, predictions: dict[str, Prediction]) -> list[dict[str, Any]]:
    """The lesson's :data:`CLAIMS` of the experiments predicted: PASS/DIFFERS on the reference and on the prediction.

    Example:
        >>> p = {"spin_kernels": Prediction("03", "spin_kernels", {"speedup": 4.0})}
        >>> [(r["recorded"], r["predicted"]) for r in claim_rows(3, p)]
        [('PASS', 'PASS')]
    """
    item = registry.lesson(lesson)
    ref = reference.results(item.number)
    rows = []
    for claim in CLAIMS:
        if claim.lesson != item.number or claim.experiment not in predictions:
            continue
        pred = predictions[claim.experiment]
        rows.append({"lesson": item.number, "experiment": claim.experiment, "claim": claim.statement,
                     "recorded": claim.verdict(ref.get(claim.experiment)),
                     "predicted": claim.verdict(pred.results) if pred.ran else "n/a"})
    return rows
