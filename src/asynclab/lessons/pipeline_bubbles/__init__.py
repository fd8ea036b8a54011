"""Lesson 07: why does a model split over two GPUs train no faster than one? Micro-batches, schedules and the bubble."""
