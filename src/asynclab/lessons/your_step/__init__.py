"""Lesson 08: your own training step. Profile it, read its diagnosis, fix the mistakes one at a time, measure each."""
