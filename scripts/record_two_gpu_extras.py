"""Record the two-GPU parts of single-GPU lessons (run on a machine with 2+ GPUs) into their references.

Lesson 02's reference comes from one H100; its claim that ``torch.cuda.synchronize()`` waits for the
current device only needs two GPUs. This runs the same experiment (``synchronize_scope``) on two GPUs and
stores it in lesson 02's results.json as ``synchronize_scope_2gpu``, with where it was recorded.

    python3 scripts/record_two_gpu_extras.py
"""
import json
import sys

import torch

from record_extras import store
from asynclab.lessons.timing import experiments as timing_pitfalls


def main() -> int:
    if torch.cuda.device_count() < 2:
        print("record_two_gpu_extras: needs two or more CUDA GPUs", file=sys.stderr)
        return 2
    result = timing_pitfalls.synchronize_scope("cuda:0")
    store(2, "synchronize_scope_2gpu", result)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
