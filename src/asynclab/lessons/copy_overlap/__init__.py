"""Lesson 05: can host<->GPU copies hide behind compute? Bandwidth, pinned memory, non_blocking, overlap."""
