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

#: The steps the simulated H200 misses by more than 30%, and why: what the model leaves out.
MISSES = {
    ("cuda_graph", "fixed"): "a replayed graph is its kernels' time alone, and cuBLAS picks a kernel for each shape "
                             "of a 64-wide fp32 layer's products: on an H200 a weight's gradient ran sgemm_largek with "
                             "a memset and a scaling (8.9 us a product), an input's gradient a split-K product and its "
                             "reduction (5.2 us), the forward product and its bias epilogue (4.0 us), where the model "
                             "prices each at the card's shortest fp32 product (3.19 us): 447 us of products a step "
                             "against 236; its elementwise kernels ran 1.05 to 1.37 us against the model's 0.85, and "
                             "Adam's multi-tensor kernels 6 us for 50 small tensors against the model's 0.85: "
                             "predicted 0.49 ms, measured 0.89",
}


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


def test_the_misses_are_on_the_side_their_reason_gives(predicted):
    """Each miss is an underestimate: the work the reason names is missing from the prediction, never added."""
    for key in MISSES:
        assert predicted[key] < 0.7 * MEASURED[key[0]][key[1]]["ms"], key


def test_a_fix_is_never_predicted_slower_than_its_mistake(predicted):
    for name in MEASURED:
        assert predicted[name, "fixed"] <= predicted[name, "bad"] * 1.01, name
