"""On the machine's own GPUs: the hardware inventory, live profiling, timers, and side-stream modules."""
