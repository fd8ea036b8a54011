"""Command line entry point: `asynclab hardware`, `asynclab timeline`, `asynclab summary`, `asynclab diagnose`, ..."""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any


class UsageError(Exception):
    """A problem with the user's input; the CLI prints it as one line and exits with status 2."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes are UsageErrors (one line, status 2) rather than usage dumps."""

    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("asynclab").strip()  # main() names asynclab once, in "asynclab: error:"
        raise UsageError(f"{command + ': ' if command else ''}{message} (see '{self.prog} --help')")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("asynclab")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def plain_text(doc: str) -> str:
    """A docstring as a terminal shows it: reStructuredText's markup (````code````, ``:role:`name```) taken out.

    Example:
        >>> plain_text("Run ``asynclab course``; raises :class:`CourseError`.")
        'Run asynclab course; raises CourseError.'
    """
    import inspect
    import re

    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", inspect.cleandoc(doc))
    return re.sub(r"``([^`]+)``", r"\1", text).strip()


def _steady(trace, host: bool = True):
    """The trace's steps, where a picture of the whole trace would spend its width on start-up, then the work drawn,
    where events that draw nothing (the profiler's span, a step that runs on idle, ...) stretch the range; each
    window is said on stdout."""
    from asynclab.trace.analysis.metrics import steady_window
    from asynclab.trace.draw.timeline import work_window

    found = steady_window(trace)
    if found is not None:
        start, end, note = found
        print(f"drew the steps: {note} (--whole draws everything)")
        trace = trace.window(start, end)
    found = work_window(trace, host=host)
    if found is not None:
        start, end, note = found
        print(f"drew the work: {note} (--whole draws everything)")
        trace = trace.window(start, end)
    return trace


def _cmd_hardware(args: argparse.Namespace) -> int:
    from asynclab.gpu import hardware

    print(hardware.report(hardware.inventory(use_torch=args.torch)))
    return 0


def _load(paths: list[str]):
    """One trace file, or several rank files (given one by one, or as their folder) as one trace."""
    from asynclab.trace import TraceError, load_trace

    try:
        return load_trace(paths[0] if len(paths) == 1 else paths)
    except TraceError as e:
        raise UsageError(str(e)) from None


def _name(args: argparse.Namespace) -> str:
    return args.trace[0] if len(args.trace) == 1 else f"{args.trace[0]} + {len(args.trace) - 1} more"


def _check_output(out: str) -> None:
    from asynclab.trace.draw.image import check_image_path

    try:
        check_image_path(out)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _cmd_timeline(args: argparse.Namespace) -> int:
    _check_output(args.output)
    who = _name(args)
    if args.annotation is not None and (args.start_ms is not None or args.end_ms is not None):
        raise UsageError(f"{who}: give --annotation or --start-ms/--end-ms, not both")
    for name in ("start_ms", "end_ms"):
        v = getattr(args, name)
        if v is not None and not (v == v and abs(v) != float("inf")):
            raise UsageError(f"{who}: --{name.replace('_', '-')} must be a finite number")
    if args.start_ms is not None and args.end_ms is not None and args.start_ms > args.end_ms:
        raise UsageError(f"{who}: --start-ms {args.start_ms:g} is after --end-ms {args.end_ms:g}")
    for flag in ("occurrence", "rank"):
        if getattr(args, flag) is not None and args.annotation is None:
            raise UsageError(f"{who}: --{flag} needs --annotation")
    trace = _load(args.trace)
    from asynclab.trace import TraceError

    try:
        if args.annotation is not None:
            trace = trace.window(annotation=args.annotation, occurrence=args.occurrence, rank=args.rank)
        elif args.start_ms is not None or args.end_ms is not None:
            s = None if args.start_ms is None else args.start_ms * 1e3
            e = None if args.end_ms is None else args.end_ms * 1e3
            trace = trace.window(s, e)
        elif not args.whole:
            trace = _steady(trace, args.host)
    except TraceError as err:
        raise UsageError(str(err)) from None
    if len(trace) == 0:
        raise UsageError(f"{who}: no events in the window {args.start_ms} to {args.end_ms} ms "
                         f"(asynclab summary shows the trace's span)")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from asynclab.trace.draw.timeline import draw_timeline

    tl = draw_timeline(trace, arrows=args.arrows, host=args.host, title=args.title)
    try:
        tl.savefig(args.output, dpi=args.dpi)
    except (ValueError, OSError) as err:
        raise UsageError(f"{args.output}: cannot write the image ({err})") from None
    finally:
        plt.close(tl.fig)
    lanes = len(tl.lanes)
    print(f"wrote {args.output}: {lanes} lane{'' if lanes == 1 else 's'}, {tl.n_events:,} "
          f"event{'' if tl.n_events == 1 else 's'} drawn")
    return 0


def _cmd_summary(args: argparse.Namespace) -> int:
    from asynclab.trace.analysis.metrics import summary

    trace = _load(args.trace)
    print(summary(trace, top=args.top))
    return 0


def _fail_on(text: str) -> tuple[str, float]:
    """``KIND[:SHARE]`` of --fail-on: a finding kind and the share of the step it may not exceed."""
    from asynclab.trace.analysis.diagnose import FOLD_SHARE
    from asynclab.trace.analysis.findings import CATALOGUE

    kind, _, share = text.partition(":")
    if kind not in CATALOGUE:
        raise UsageError(f"--fail-on {text}: no finding kind {kind!r} (kinds: {', '.join(CATALOGUE)})")
    try:
        limit = float(share.rstrip("%")) / (100 if share.endswith("%") else 1) if share else FOLD_SHARE
    except ValueError:
        raise UsageError(f"--fail-on {text}: the share must be a number such as 0.05 or 5%") from None
    if not 0 <= limit < 1:
        raise UsageError(f"--fail-on {text}: the share must be at least 0 and under 1 (or 100%)")
    return kind, limit


def _cmd_course(args) -> int:
    from asynclab.course import notebooks as course

    try:
        return course.command(args)
    except course.CourseError as err:
        raise UsageError(str(err)) from None


def _cmd_diagnose(args: argparse.Namespace) -> int:
    from asynclab.trace.analysis.diagnose import diagnose
    from asynclab.trace import TraceError

    limits = [_fail_on(t) for t in args.fail_on or []]
    trace = _load(args.trace)
    try:
        d = diagnose(trace, step=args.step)
    except TraceError as err:
        raise UsageError(str(err)) from None
    print(d.to_json() if args.json else d.text())
    if args.what_if and not args.json:
        print(d.what_if())
    failed = [(k, lim, d.share(k)) for k, lim in limits if d.share(k) > lim]
    for kind, limit, share in failed:
        print(f"asynclab: {kind} loses {100 * share:.1f}% of the step, over the {100 * limit:g}% that "
              f"--fail-on allows", file=sys.stderr)
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand registered.

    Example:
        >>> build_parser().parse_args(["hardware"]).command
        'hardware'
    """
    parser = _Parser(prog="asynclab", description="asynclab: see what the GPU really did.")
    parser.add_argument("--version", action="version", version=f"asynclab {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hardware", help="print the hardware report and the course mode",
                       description="Print this machine's GPUs, their memory, peer access and links, the versions of "
                                   "torch, CUDA and the driver, and which lessons run live here.")
    p.add_argument("--no-torch", dest="torch", action="store_false",
                   help="ask nvidia-smi only, without importing torch (fast; no P2P matrix)")
    p.set_defaults(func=_cmd_hardware)

    _add_trace_commands(sub)

    from asynclab.course import notebooks as course

    p = sub.add_parser("course", help="execute the course notebooks headless and write their figures",
                       description=plain_text(course.command.__doc__ or ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    course.add_arguments(p)
    p.set_defaults(func=_cmd_course)

    _add_classroom(sub)
    return parser


def _add_trace_commands(sub) -> None:
    """``timeline``, ``summary`` and ``diagnose``: the commands that read traces (they never import torch)."""
    p = sub.add_parser("timeline", help="draw a torch.profiler trace as a timeline image (.png or .svg)",
                       description="Draw a torch.profiler trace (.json or .json.gz): one lane per GPU stream "
                                   "and per host thread that launched work. Several files, or a folder of "
                                   "them, are the ranks of one run: drawn on one timeline, clocks aligned.")
    p.add_argument("trace", nargs="+", help="trace file (.json or .json.gz), several rank files, or their folder")
    p.add_argument("-o", "--output", required=True, help="image to write (.png or .svg)")
    p.add_argument("--start-ms", type=float, default=None, help="window start, ms from the trace start")
    p.add_argument("--end-ms", type=float, default=None, help="window end, ms from the trace start")
    p.add_argument("--annotation", default=None, help="zoom on the record_function annotation of this name")
    p.add_argument("--occurrence", type=int, default=None, help="with --annotation: only its N-th occurrence (0-based)")
    p.add_argument("--rank", type=int, default=None,
                   help="with --annotation, in a run of several ranks: that rank's annotation only (its own "
                        "occurrences); every rank is still drawn")
    p.add_argument("--arrows", action=argparse.BooleanOptionalAction, default=False,
                   help="draw launch -> kernel arrows (default: off)")
    p.add_argument("--no-host", dest="host", action="store_false", help="draw only the GPU lanes")
    p.add_argument("--whole", action="store_true",
                   help="draw the whole trace (default: the profiler's steps, where the trace has them and they "
                        "leave out a tenth of it or more, and within them the work drawn, where events that draw "
                        "nothing stretch the range by a tenth or more)")
    p.add_argument("--title", default=None, help="figure title")
    p.add_argument("--dpi", type=int, default=200, help="PNG resolution (default 200: sharp zoomed in on a phone)")
    p.set_defaults(func=_cmd_timeline)

    p = sub.add_parser("summary", help="print what a trace shows: devices, streams, busy/idle, overlap, "
                                       "communication, steps, top kernels",
                       description="Summarise a torch.profiler trace (.json or .json.gz), or the rank files "
                                   "of one run (several files, or their folder).")
    p.add_argument("trace", nargs="+", help="trace file (.json or .json.gz), several rank files, or their folder")
    p.add_argument("--top", type=int, default=10, help="how many kernels to list (default 10)")
    p.set_defaults(func=_cmd_summary)

    p = sub.add_parser("diagnose", help="name the asynchrony mistakes in a training trace: what each costs a "
                                        "step, where, why, the fix and the lesson",
                       description="Diagnose a torch.profiler trace (.json or .json.gz), or the rank files of one "
                                   "run: every stretch in which a GPU computes nothing is given a cause (host_sync, "
                                   "launch_bound, pageable_copy, exposed_copy, small_copies, dataloader_stall, "
                                   "exposed_comm, rank_skew, pipeline_bubble, alloc_churn, stream_wait) or counted as "
                                   "unexplained; underfilled_gpu is time a lone kernel left most SMs empty. What each "
                                   "fix saves is predicted by replaying the step without the mistake, without the "
                                   "profiler's own cost.")
    p.add_argument("trace", nargs="+", help="trace file (.json or .json.gz), several rank files, or their folder")
    p.add_argument("--json", action="store_true", help="print one JSON object with every finding")
    p.add_argument("--step", type=int, default=None, help="diagnose only step N (its ProfilerStep#N)")
    p.add_argument("--what-if", action="store_true",
                   help="print the replayed step (without the profiler) after each fix and after all of them "
                        "(--json has them under what_if)")
    p.add_argument("--fail-on", action="append", metavar="KIND[:SHARE]",
                   help="exit with status 1 when KIND loses more than SHARE of the step (default 0.02; "
                        "0.05 or 5%%); repeat for several kinds. A guard for CI")
    p.set_defaults(func=_cmd_diagnose)


def _add_classroom(sub) -> None:
    """``classroom``: the nbgrader course, its examples and its grading."""
    p = sub.add_parser("classroom", help="an nbgrader course from the notebooks, and its grading on examples",
                       description="source DIR: write an nbgrader course folder (DIR/source/NN_name/, "
                                   "nbgrader_config.py) from the notebooks. examples DIR: also generate the student "
                                   "versions, autograde a solved and an as-shipped submission per lesson, and "
                                   "print the gradebook. grade DIR NN_name [STUDENT ...]: nbgrader autograde the "
                                   "collected submissions (all, or those named), then grade every exercise again in "
                                   "a fresh process that no notebook can change, into the gradebook.")
    p.add_argument("action", choices=("source", "examples", "grade"))
    p.add_argument("folder", help="the course folder")
    p.add_argument("assignment", nargs="?", help="grade: the assignment (NN_name)")
    p.add_argument("students", nargs="*", help="grade: the students (default: every submission)")
    p.add_argument("--notebooks", default=None, help="where the course notebooks are (default: those the package "
                                                      "carries, the repository's notebooks/ in a clone)")
    p.add_argument("--lessons", nargs="+", default=None, metavar="NN", help="only these lessons (examples)")
    p.set_defaults(func=_cmd_classroom)


def _cmd_classroom(args: argparse.Namespace) -> int:
    from asynclab.grading import classroom

    args.notebooks = args.notebooks or classroom.course_notebooks()
    try:
        if args.action == "source":
            for path in classroom.write_source(args.folder, args.notebooks):
                print(path)
            return 0
        if args.action == "grade":
            return _grade(classroom, args)
        rows = classroom.examples(args.folder, args.notebooks, args.lessons)
    except (classroom.ClassroomError, ModuleNotFoundError) as err:
        raise UsageError(f"classroom: {err}" + (" (install the classroom extra: pip install 'asynclab[classroom]')"
                                                if isinstance(err, ModuleNotFoundError) else "")) from None
    print(classroom.table(rows))
    wrong = [r for r in rows if r["score"] != (r["max_score"] if r["student"] == "solved" else 0.0)]
    for r in wrong:
        print(f"asynclab classroom: {r['lesson']}: {r['student']} scored {r['score']:g} of {r['max_score']:g}",
              file=sys.stderr)
    return 1 if wrong else 0


def _grade(classroom: Any, args: argparse.Namespace) -> int:
    """``asynclab classroom grade COURSE NN_name [STUDENT ...]``: a line per student and exercise."""
    from pathlib import Path

    from asynclab.grading.checks import brief

    if not args.assignment:
        raise UsageError("classroom grade: name the assignment, e.g. asynclab classroom grade COURSE 03_streams")
    submitted = Path(args.folder) / "submitted"
    students = args.students or sorted(p.parent.name for p in submitted.glob(f"*/{args.assignment}"))
    if not students:
        raise UsageError(f"classroom grade: no submissions of {args.assignment} in {submitted}")
    for student, result in classroom.grade(args.folder, args.assignment, students).items():
        print(f"{student}: {result['score']:g} / {result['max_score']:g}")
        for cell, grade in result["checks"].items():
            print(f"  {cell}: {'right' if grade.right else 'not right'}: {brief(grade.message, 160)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (2 for bad input, with one line on stderr).

    Example:
        >>> main(["summary", "/no/such/trace.json"])  # doctest: +SKIP
        2
    """
    parser = build_parser()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            args = parser.parse_args(argv)
            status = args.func(args)
        except UsageError as e:
            _print_warnings(caught)
            print(f"asynclab: error: {_one_line(e)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:  # pragma: no cover
            print("asynclab: interrupted", file=sys.stderr)
            return 130
        except Exception as e:  # a bug, not bad input: still one line unless asked for the traceback
            if os.environ.get("ASYNCLAB_DEBUG"):
                raise
            _print_warnings(caught)
            print(f"asynclab: internal error: {type(e).__name__}: {_one_line(e)} "
                  f"(set ASYNCLAB_DEBUG=1 for a traceback)", file=sys.stderr)
            return 1
    _print_warnings(caught)
    return status


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _print_warnings(caught: list) -> None:
    from asynclab.trace.read.events import TraceWarning

    for w in caught:
        if issubclass(w.category, TraceWarning):
            print(f"asynclab: warning: {_one_line(w.message)}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
