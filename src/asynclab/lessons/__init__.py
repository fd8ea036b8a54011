"""The lessons, one package each (``lessons/<name>/``: experiments, exercises, reference); the registry is in
:mod:`asynclab.course.registry`, whose names are here too (``al.lessons.LESSONS``)."""
from asynclab.course.registry import *  # noqa: F401,F403 - the registry's names, under the lessons' package
from asynclab.course.registry import __all__  # noqa: F401
