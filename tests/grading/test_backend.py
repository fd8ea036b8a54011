"""The checkers' backend: one scenario for a GPU and the simulated one, and checkers that import no simulator."""
import ast
from pathlib import Path

import pytest
import torch

from asynclab.grading.backend import Backend, Simulated, backend

LESSONS = Path(__file__).resolve().parents[2] / "src" / "asynclab" / "lessons"

#: The simulators' modules: a checker writes its scenario against the backend, never against them.
SIMULATORS = {"asynclab.sim.device", "asynclab.sim.ops", "asynclab.sim.kernel_costs", "asynclab.sim.methods",
              "asynclab.sim.trace", "asynclab.sim.cuda"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


@pytest.mark.parametrize("lesson", sorted(p.parent.name for p in LESSONS.glob("*/exercises.py")))
def test_a_checker_imports_no_simulator(lesson):
    used = {name for name in _imports(LESSONS / lesson / "exercises.py")
            if name in SIMULATORS}
    assert not used, f"{lesson}/exercises.py imports {used}: use asynclab.grading.backend"


def test_the_import_check_sees_a_simulator_import(tmp_path):
    bad = tmp_path / "exercises.py"
    bad.write_text("from asynclab.sim.device import SimGPU\nimport asynclab.sim.ops\n")
    assert _imports(bad) & SIMULATORS == {"asynclab.sim.device", "asynclab.sim.ops"}


def test_without_a_gpu_the_backend_is_simulated_and_says_so():
    b = backend()
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert isinstance(b, Simulated) and "simulated GPU" in b.where
    assert b.nbytes(64 << 20) == 64 << 10
    assert Backend().nbytes(64 << 20) == 64 << 20


def test_late_copies_start_after_their_spin():
    b = Simulated(1, 0)
    with b:
        losses = b.late_copies(torch.ones(4, device="cuda"), 20.0)
        out = torch.zeros(4, pin_memory=True)
        out.copy_(losses, non_blocking=True)
        assert out.tolist() == [0.0] * 4  # the copy has not landed: it starts after a 20 ms spin
        torch.cuda.synchronize()
        assert out.tolist() == [1.0] * 4 and b.gpu.host >= 20.0


def test_profile_gives_one_step_per_run():
    b = Simulated(1, 0)
    with b:
        x = torch.ones(1024, device="cuda")
        trace = b.profile(lambda: x * 2, runs=3)
    steps = trace.events[trace.events["name"] == "asynclab.step"]
    assert (steps["kind"] == "annotation").sum() == 3 and (steps["kind"] == "gpu_annotation").sum() == 3
    assert (trace.events["name"] == "mul").sum() == 3  # the warm-up run is not in the trace


def test_counting_host_reads_does_not_import_torch_compile():
    """PyTorch wraps a dispatch mode so that torch.compile stays out of it, and the wrapper imports torch._dynamo on
    the mode's first operator: 3-8 s before a learner's first verdict on a GPU. The mode that counts reads opts out."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from asynclab.grading.hostreads import count_reads\n"
            "from asynclab.sim.device import SimGPU\n"
            "with SimGPU():  # host tensors: the operators pass through the mode, and nothing else runs\n"
            "    result, reads = count_reads(lambda losses: sum(float(x) for x in losses), [torch.ones(()), torch.ones(())])\n"
            "assert result == 2.0, result\n"
            "print('torch._dynamo' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "False"
