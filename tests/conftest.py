"""Shared pytest set-up: nbval's comparison rules for the notebooks, and the `gpu` marker for unit tests.

The Makefile loads this file as a plugin for the nbval run (`-p tests.conftest`), so the
notebook rules apply to notebooks/ as well as to tests/.
"""
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


def pytest_collection_modifyitems(config, items):
    for item in items:
        if hasattr(item, "output_timeout"):  # an nbval notebook cell
            item.output_timeout = OUTPUT_TIMEOUT_S
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fresh_session_gpu_state():
    """Each unit test starts as a fresh process would: GPU 0 current, its default stream current (the simulated
    GPUs keep these across checks, as a real session does)."""
    from asynclab.sim import cuda as simcuda

    simcuda.forget_current()
    yield
