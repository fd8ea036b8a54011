"""A ``torch.compile``'d answer, judged as the eager code it compiles, the same way with a GPU and without one.

A compiled function's first calls compile it: they read the GPU's results on the host and wait, which its steady
state does not. A check would count those reads, and the simulated GPU cannot run the compiler's kernels. So while a
check runs, ``torch.compiler.set_stance("force_eager")`` (PyTorch 2.6 and later) runs every compiled function as the
Python it compiles: its host reads, its waits and its results are those of the steady state, where the compiler keeps
each host read that the code asks for (a ``.item()`` breaks the graph there). On an NVIDIA H200 (PyTorch 2.11), a
compiled running sum read with one ``.item()`` made 26 host reads on its first call and 1 on each of the next four, as
the eager code does; one that reads each of 50 losses with ``float`` made 50 on every call, as the eager code does.
The verdict says so. On an older
PyTorch, a compiled answer is not judged, on a GPU or not, and the verdict says why.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

__all__ = ["EAGER_NOTE", "compiled_in", "eager_compile", "too_old"]

#: What a verdict on a compiled answer adds.
EAGER_NOTE = ("torch.compile was set aside: your code ran as the Python it compiles, which reads the host as the "
              "compiled code's steady state does; a first call, which compiles, reads more")


def _is_compiled(obj: Any) -> bool:
    """Whether ``obj`` is what ``torch.compile`` returns, for a function or for a module."""
    return callable(obj) and (hasattr(obj, "_torchdynamo_orig_callable") or type(obj).__name__ == "OptimizedModule")


def compiled_in(answers: tuple) -> bool:
    """Whether an answer, or a global name or a closed-over variable its code reads, is a ``torch.compile``'d function
    or module.

    Example:
        >>> import torch
        >>> step = torch.compile(lambda x: x + 1)
        >>> def answer(x):
        ...     return step(x)
        >>> compiled_in((answer,)), compiled_in((abs, 3))
        (True, False)
    """
    for obj in answers:
        if _is_compiled(obj):
            return True
        code, names = getattr(obj, "__code__", None), getattr(obj, "__globals__", {})
        if code is not None and any(_is_compiled(names.get(name)) for name in code.co_names):
            return True
        cells = getattr(obj, "__closure__", None) or ()
        if any(_is_compiled(_content(cell)) for cell in cells):
            return True
    return False


def _content(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a variable not yet bound
        return None


def too_old() -> str | None:
    """Why a compiled answer cannot be judged on this PyTorch (it has no ``torch.compiler.set_stance``), or None.

    Example:
        >>> import torch
        >>> (too_old() is None) == hasattr(torch.compiler, "set_stance")
        True
    """
    import torch

    if hasattr(getattr(torch, "compiler", None), "set_stance"):
        return None
    return (f"a torch.compile'd answer is judged on PyTorch 2.6 and later, which can run it as the Python it compiles "
            f"(this is PyTorch {torch.__version__.split('+')[0]}); judge the same code without torch.compile, or "
            f"upgrade PyTorch. This is the check's limit, not a fault in your answer")


@contextlib.contextmanager
def eager_compile() -> Iterator[None]:
    """Run every ``torch.compile``'d function as the Python it compiles for a block (where PyTorch can).

    Example:
        >>> import torch
        >>> with eager_compile():
        ...     torch.ones(2).tolist()
        [1.0, 1.0]
    """
    import torch

    stance = getattr(getattr(torch, "compiler", None), "set_stance", None)
    if stance is None:
        yield
        return
    with stance("force_eager"):
        yield
