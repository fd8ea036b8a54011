"""Python runs this at start-up when scripts/memcap is on PYTHONPATH (scripts/gpu_check.sh --memory-cap-gib N):
every process of the GPU check, notebook kernels and torchrun's children too, caps its GPU memory."""
import os

if os.environ.get("ASYNCLAB_GPU_MEMORY_GIB"):
    from asynclab.gpu.hardware import cap_memory_when_cuda_starts

    cap_memory_when_cuda_starts(float(os.environ["ASYNCLAB_GPU_MEMORY_GIB"]))
