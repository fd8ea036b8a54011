"""Shared pytest set-up: nbval's comparison rules for the notebooks, and the `gpu` marker for unit tests.

The Makefile loads this file as a plugin for the nbval run (`-p tests.conftest`), so the
notebook rules apply to notebooks/ as well as to tests/.
"""
import re

import pytest

# nbval compares every output of an unmarked cell. These output types are never stable across
# machines or runs, so they are not compared (see tests/NBVAL_POLICY.md):
#   stderr         - warnings and progress bars differ between library versions
#   image/svg+xml  - SVG carries random ids; the course draws PNG
#   text/html      - pandas' HTML differs between versions; the text/plain of the same output is compared
SKIP_COMPARE = ("stderr", "image/svg+xml", "text/html", "application/javascript")


def pytest_collectstart(collector):
    if collector.path is not None and collector.path.suffix == ".ipynb":
        collector.skip_compare = tuple(collector.skip_compare) + SKIP_COMPARE


# nbval waits 5 s for each output message once a cell has run, and a loaded CI machine can be
# slower than that; the wait ends as soon as the message comes, so a longer limit costs nothing.
OUTPUT_TIMEOUT_S = 60


#: Figure cells whose stored output was drawn on a GPU before the timeline's current drawing, and so differs from it
#: in the figure's size: their ``<Figure size ...>`` line is left out of the comparison until the notebook is
#: re-executed on a GPU (``scripts/gpu_check.sh --refresh``). An entry whose stored output matches again fails the
#: run, so that it is removed. Everything else in these cells is still compared.
AWAITING_GPU_REFRESH: dict[tuple[str, str], str] = {}
_FIGURE_SIZE = re.compile(r"<Figure size [0-9.]+x[0-9.]+ with")


def _figure_size_left_out(item):
    """``item``'s comparison with the size of its figures left out, which fails if the sizes match again."""
    compare, sanitize = item.compare_outputs, item.sanitize

    def compare_outputs(test, ref, skip_compare=None):
        if compare(test, ref, skip_compare):
            pytest.fail(f"{item.parent.path.name} {item.name}: its stored figure matches the drawing again: remove it "
                        "from AWAITING_GPU_REFRESH in tests/conftest.py", pytrace=False)
        item.sanitize = lambda s: _FIGURE_SIZE.sub("<Figure size SIZE with", sanitize(s)) if isinstance(s, str) else s
        try:
            return compare(test, ref, skip_compare)
        finally:
            item.sanitize = sanitize
    item.compare_outputs = compare_outputs


def pytest_collection_modifyitems(config, items):
    for item in items:
        if hasattr(item, "output_timeout"):  # an nbval notebook cell
            item.output_timeout = OUTPUT_TIMEOUT_S
            if (item.parent.path.name, item.name) in AWAITING_GPU_REFRESH:
                _figure_size_left_out(item)
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:  # the marker, not the keyword: every test under tests/gpu/ has the keyword "gpu"
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fresh_session_gpu_state():
    """Each unit test starts as a fresh process would: GPU 0 current, its default stream current (the simulated
    GPUs keep these across checks, as a real session does)."""
    from asynclab.sim.running import forget_current

    forget_current()
    yield
