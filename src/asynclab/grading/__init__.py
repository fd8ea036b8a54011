"""Grading: claims and exercise checks, the host's reads, scenarios on a GPU or the simulated one, fresh-process grades, classrooms."""
