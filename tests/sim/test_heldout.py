"""Training steps nobody tuned the simulated GPU for (tests/fixtures/heldout_steps: nine planted mistakes and their
fixes, written from a description of each by someone who had not read asynclab.sim), timed as users time them, on the
simulated H200 against their times on an NVIDIA H200."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import asynclab as al

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "heldout_steps"
MEASURED = json.loads((HERE / "measured_h200.json").read_text())["cases"]

#: The steps the simulated H200 misses by more than 30%, and why: what the model leaves out. None now: the CUDA-graph
#: step's replay (0.49 ms predicted against 0.89) was missing cuBLAS's choice of kernels for a small float32 product
#: by layout and shape (the card's ``fp32_product_us_by_shape``, measured on an H200 on 80 shapes of a Linear layer).
MISSES: dict[tuple[str, str], str] = {}


def _steps():
    spec = importlib.util.spec_from_file_location("heldout_steps", HERE / "steps.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def predicted() -> dict:
    steps = _steps()
    out = {}
    for name, makers in steps.CASES.items():
        for which, make in zip(("bad", "fixed"), makers):
            trace = al.simulate(lambda: steps.time_step(make()), card="H200", values=False)
            out[name, which] = trace.meta["simulated"]["returned"]
    return out


def test_the_measurements_name_their_gpu_and_cover_every_case():
    meta = json.loads((HERE / "measured_h200.json").read_text())["meta"]
    assert meta["gpu"] == "NVIDIA H200" and meta["torch"].startswith("2.")
    assert sorted(MEASURED) == sorted(_steps().CASES)


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.xfail(reason=MISSES[k], strict=True))
                                 if k in MISSES else k
                                 for k in ((n, w) for n in sorted(MEASURED) for w in ("bad", "fixed"))],
                         ids=lambda k: f"{k[0]}-{k[1]}")
def test_a_held_out_step_is_predicted_within_30_percent(predicted, key):
    ratio = predicted[key] / MEASURED[key[0]][key[1]]["ms"]
    assert 0.7 <= ratio <= 1.3, f"{key}: predicted {predicted[key]:.2f} ms, {ratio:.2f} of the H200's"


@pytest.mark.parametrize("key", sorted(MISSES), ids=lambda k: f"{k[0]}-{k[1]}")
def test_the_misses_are_on_the_side_their_reason_gives(predicted, key):
    """Each miss is an underestimate: the work the reason names is missing from the prediction, never added."""
    assert predicted[key] < 0.7 * MEASURED[key[0]][key[1]]["ms"], key


def test_a_fix_is_never_predicted_slower_than_its_mistake(predicted):
    for name in MEASURED:
        assert predicted[name, "fixed"] <= predicted[name, "bad"] * 1.01, name
