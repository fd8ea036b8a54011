"""Lesson 05: can host<->GPU copies hide behind compute? Bandwidth, pinned memory, non_blocking, overlap."""

#: What each GPU-only experiment returns on a machine without a GPU.
NO_GPU = "no CUDA GPU: there is no host-to-GPU copy to measure (the CPU's tensors are already in host memory)"

MiB = 1 << 20
