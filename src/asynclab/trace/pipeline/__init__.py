"""Pipeline-parallel schedules simulated op by op into a Trace (schedules): no torch, no profiler."""
