"""Lesson 06: when does a GPU-to-GPU copy overlap with compute? PyTorch's cross-device barrier, NVLink bandwidth and latency."""
