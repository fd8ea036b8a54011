"""torch.cuda's public API, enumerated: every function and Stream/Event method that takes no argument either runs on
the simulated GPU or is the simulation's limit ("Not judged here"); none gives a verdict that blames the learner for
what a GPU would run."""
import json
import subprocess
import sys
from pathlib import Path

SWEEP = Path(__file__).with_name("torch_cuda_sweep.py")


def test_every_torch_cuda_call_runs_or_is_the_simulations_limit():
    done = subprocess.run([sys.executable, str(SWEEP)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(outcomes) > 50  # the sweep reached torch.cuda's API, not a handful of names
    blames = {name: how for name, how in outcomes.items() if how.startswith("blames")}
    assert blames == {}
    runs = {name for name, how in outcomes.items() if how == "runs"}
    assert {"torch.cuda.synchronize", "torch.cuda.current_stream", "torch.cuda.Stream.query",
            "torch.cuda.Event.record", "torch.cuda.Event.synchronize"} <= runs
