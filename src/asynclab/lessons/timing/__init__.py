"""Lesson 02 (timing): experiments, exercises and reference."""
