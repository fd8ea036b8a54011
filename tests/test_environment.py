"""The environment the README's commands create: d2l imports with numpy 2, and the two dependency lists agree."""
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name


def _name(spec: str) -> str:
    return re.split(r"[<>=!~\[ ;]", spec.strip(), maxsplit=1)[0].lower()


def pyproject_deps() -> set[str]:
    tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else pytest.importorskip("tomli")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = data["project"]
    names = {_name(d) for d in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        names |= {_name(d) for d in extra}
    return names


def environment_deps() -> set[str]:
    names = set()
    text = (ROOT / "environment.yml").read_text()
    for line in text.split("\ndependencies:", 1)[1].splitlines():
        m = re.match(r"^\s+-\s+([A-Za-z][\w.-]*)", line)  # conda packages, and those under `pip:`
        if m and m.group(1) not in ("python", "pip"):
            names.add(CONDA_NAMES.get(m.group(1).lower(), m.group(1).lower()))
    return names


def test_environment_yml_mirrors_pyproject():
    assert environment_deps() == pyproject_deps()


def test_environment_yml_installs_the_package():
    assert "- -e ." in (ROOT / "environment.yml").read_text()


def test_d2l_imports_with_numpy_2():
    import numpy

    assert int(numpy.__version__.split(".")[0]) >= 2, numpy.__version__
    from d2l import torch as d2l

    timer = d2l.Benchmark("ok")
    with timer:
        pass
    assert hasattr(d2l, "Benchmark") and hasattr(d2l, "try_gpu")


def test_ci_calls_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make course" in readme
    assert re.search(r"^\s*make test\b", ci, re.M)


def test_make_lab_has_jupyterlab():
    """``make lab`` runs ``jupyter lab`` from the environment's bin folder."""
    import subprocess

    pytest.importorskip("jupyterlab", reason="JupyterLab is the course extra's; the GPU check installs no JupyterLab")
    assert "$(BIN)/jupyter lab notebooks" in (ROOT / "Makefile").read_text()
    proc = subprocess.run([str(Path(sys.executable).parent / "jupyter"), "lab", "--version"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip()[0].isdigit(), proc.stderr[-500:]
