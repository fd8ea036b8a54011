"""Lesson 01 (async dispatch): experiments, exercises and reference."""
