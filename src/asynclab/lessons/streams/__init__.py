"""Lesson 03 (streams): experiments, exercises and reference."""
