"""Lesson 04: events order work across streams and devices; a race made certain, fixed, and caught by the CUDA sanitizer."""
