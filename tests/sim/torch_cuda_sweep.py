"""Call every public torch.cuda function that takes no argument, and every Stream and Event method that takes none,
inside a check on the simulated GPU; print how each ended as JSON ({name: "runs" | "limit" | "blames: ..."}).

Run by tests/sim/test_torch_cuda_api.py in a process of its own (it sets up a notebook session with al.start).
"""
import inspect
import json

import torch

import asynclab as al
from asynclab.grading.backend import backend
from asynclab.grading.checks import raised


def takes_no_argument(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return not any(p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)


def outcome(call) -> str:
    try:
        call()
        return "runs"
    except BaseException as err:  # noqa: BLE001 - every way a call can end
        verdict = raised(err)
        return "limit" if not verdict.judged else f"blames: {verdict}"


def main() -> None:
    al.start(3)
    out = {}
    with backend(1):
        for name in sorted(n for n in dir(torch.cuda) if not n.startswith("_")):
            fn = getattr(torch.cuda, name)
            if callable(fn) and (inspect.isfunction(fn) or inspect.isbuiltin(fn)) and takes_no_argument(fn):
                out[f"torch.cuda.{name}"] = outcome(fn)
        for kind in ("Stream", "Event"):
            obj = getattr(torch.cuda, kind)()
            for name in sorted(n for n in dir(obj) if not n.startswith("_")):
                method = getattr(obj, name, None)
                if inspect.ismethod(method) and takes_no_argument(method):
                    out[f"torch.cuda.{kind}.{name}"] = outcome(method)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
