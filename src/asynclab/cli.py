"""Command line entry point: `asynclab hardware`, `asynclab timeline`, `asynclab summary`, ..."""
from __future__ import annotations

import argparse
import sys


class UsageError(Exception):
    """A problem with the user's input; the CLI prints it as one line and exits with status 2."""


def _cmd_hardware(args: argparse.Namespace) -> int:
    from asynclab import hardware

    print(hardware.report())
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand registered.

    Example:
        >>> build_parser().parse_args(["hardware"]).command
        'hardware'
    """
    parser = argparse.ArgumentParser(prog="asynclab", description="asynclab: see what the GPU really did.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hardware", help="print the hardware report and the course mode")
    p.set_defaults(func=_cmd_hardware)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (2 for bad input, with one line on stderr)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as e:
        print(f"asynclab: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
