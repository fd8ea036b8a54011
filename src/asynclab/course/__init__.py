"""The course: the lesson registry, references recorded on real GPUs, lesson runs, experiments' shared helpers, notebooks."""
