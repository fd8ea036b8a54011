"""The oldest PyTorch the course supports: pyproject.toml's bound is what `make test-oldest` installs, CI runs it,
and what older PyTorch releases check of the simulated GPU's stand-ins holds."""
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test_oldest.sh"


def pyproject_oldest_torch() -> str:
    tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else pytest.importorskip("tomli")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    bounds = [m.group(1) for d in deps if (m := re.fullmatch(r"torch>=([0-9.]+)", d.replace(" ", "")))]
    assert len(bounds) == 1, f"pyproject.toml should have one 'torch>=X' dependency: {deps}"
    return bounds[0]


def script_oldest_torch() -> str:
    """What scripts/test_oldest.sh's own oldest_torch function reads from pyproject.toml."""
    text = SCRIPT.read_text()
    function = re.search(r"^oldest_torch\(\) \{\n.*?^\}\n", text, re.M | re.S)
    assert function, "scripts/test_oldest.sh should define oldest_torch()"
    out = subprocess.run(["bash", "-c", f"set -euo pipefail\n{function.group(0)}oldest_torch"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_script_installs_pyprojects_oldest_torch():
    assert script_oldest_torch() == pyproject_oldest_torch()
    text = SCRIPT.read_text()
    assert "torch=$(oldest_torch)" in text and '"torch==$torch" torchvision' in text
    assert re.search(r"^set -euo pipefail$", text, re.M)


def test_the_script_runs_the_tests_as_make_test_does():
    makefile = (ROOT / "Makefile").read_text()
    nbval = re.search(r"^NBVAL\s*:=\s*(.+)$", makefile, re.M).group(1).split()
    parallel = re.search(r"^PARALLEL\s*:=\s*(.+)$", makefile, re.M).group(1).split()
    text = SCRIPT.read_text()
    assert f"NBVAL=({' '.join(nbval)})" in text and f"PARALLEL=({' '.join(parallel)})" in text
    assert re.search(r"^\s+\$\(PYTEST\) \$\(PARALLEL\) tests$", makefile, re.M)
    assert re.search(r"^\s+\$\(PYTEST\) \$\(PARALLEL\) \$\(NBVAL\) notebooks$", makefile, re.M)
    assert re.search(r"^PYTEST=\(\"\$PY\" -m pytest -p no:cacheprovider\)$", text, re.M)
    for run in ('"${PYTEST[@]}" "${PARALLEL[@]}" "${OLDEST_TESTS[@]}"', '"${PYTEST[@]}" --doctest-modules src/asynclab',
                '"${PYTEST[@]}" "${PARALLEL[@]}" "${NBVAL[@]}" notebooks'):
        assert re.search(rf"^{re.escape(run)}$", text, re.M), run
    assert re.search(r"^test-oldest:.*\n\tbash scripts/test_oldest\.sh$", makefile, re.M)


def _oldest_tests() -> set[str]:
    body = re.search(r"^OLDEST_TESTS=\((.*?)\)$", SCRIPT.read_text(), re.M | re.S).group(1)
    return set(body.split())


def test_the_oldest_torch_runs_every_test_that_imports_torch():
    """A test file that imports torch can break on an older PyTorch: the oldest run keeps it. The files it leaves out
    run no torch of their own (they read traces, draw, or check the book, the workflows and nbgrader's flow)."""
    chosen = _oldest_tests()
    assert all((ROOT / f).is_file() for f in chosen), sorted(f for f in chosen if not (ROOT / f).is_file())
    uses_torch = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                  if re.search(r"^\s*(import torch|from torch)\b", p.read_text(), re.M)}
    assert uses_torch <= chosen, sorted(uses_torch - chosen)
    assert {"tests/gpu/test_record.py", "tests/trace/test_trace.py", "tests/grading/test_answers.py"} <= chosen


def test_colab_and_kaggle_torch_is_inside_the_range():
    from packaging.version import Version

    # Colab and Kaggle ship torch 2.8 or newer (late 2026)
    assert Version(pyproject_oldest_torch()) <= Version("2.8")


def test_ci_runs_test_oldest_after_make_test():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^set -euo pipefail$", ci, re.M)
    test, oldest = re.search(r"^make test$", ci, re.M), re.search(r"^make test-oldest$", ci, re.M)
    assert test and oldest and test.start() < oldest.start()


def test_torchvision_imports_with_the_stand_ins_in_place():
    """torchvision (and with it d2l) imports torch._dynamo, which before PyTorch 2.6 asserts that torch.cuda.Event
    and Stream are torch's own kinds: the stand-ins must pass, on any PyTorch the course supports."""
    code = textwrap.dedent("""
        import torch
        torch.cuda.is_available = lambda: False  # a machine without a GPU, as far as the stand-ins are concerned
        from asynclab.sim.simulation import stand_in_for_cuda
        assert stand_in_for_cuda()
        import torchvision
        print("ok", torch.cuda.Event.__module__)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "asynclab.sim.cuda"]
