"""The learner's JupyterLab (`make lab`): nbgrader's classroom tools (its menu, Create Assignment, Formgrader,
Assignments) are turned off there, through the config folder jupyter-learner/; the instructor's lab keeps them."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
#: nbgrader's JupyterLab extension (one package: the menu, Create Assignment, Formgrader, Assignments, Courses).
LAB_EXTENSION = "@jupyter/nbgrader"
_SERVER_EXTENSIONS = """
import json
from jupyter_server.serverapp import ServerApp
app = ServerApp()
app.find_server_extensions()  # how the server reads which extensions to load, from every Jupyter config folder
print(json.dumps({k: v for k, v in app.jpserver_extensions.items() if k.startswith("nbgrader")}))
"""


def _learner_config_path() -> str:
    """The JUPYTER_CONFIG_PATH that `make lab` runs JupyterLab with (read from make's dry run of the target)."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make here")
    done = subprocess.run([make, "-n", "-o", "setup", "lab"], cwd=ROOT, capture_output=True, text=True, check=True)
    command = next(line for line in done.stdout.splitlines() if "jupyter lab notebooks" in line)
    found = re.search(r'JUPYTER_CONFIG_PATH="([^"$]+)', command)
    assert found, f"`make lab` sets no JUPYTER_CONFIG_PATH: {command}"
    return found.group(1)


def _jupyter(tmp_path: Path, config_path: str | None, *args: str) -> str:
    """Run a Jupyter command as a learner with an empty home would, with or without the given config path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(HOME=str(tmp_path), JUPYTER_CONFIG_DIR=str(tmp_path / ".jupyter"), NO_COLOR="1")
    if config_path is not None:
        env["JUPYTER_CONFIG_PATH"] = config_path
    done = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True)
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def _nbgrader_line(listing: str) -> str:
    return next((line for line in listing.splitlines() if LAB_EXTENSION in line and " v" in line), "")


def test_the_learners_lab_turns_nbgraders_classroom_tools_off(tmp_path):
    jupyter = BIN / "jupyter"
    if not jupyter.exists():
        pytest.skip("Jupyter is not installed beside this Python")
    config = _learner_config_path()
    assert Path(config) == ROOT / "jupyter-learner"
    as_installed = _jupyter(tmp_path, None, str(jupyter), "labextension", "list")
    if "enabled" not in _nbgrader_line(as_installed):
        pytest.skip(f"nbgrader's JupyterLab extension is not installed here (the classroom extra): "
                    f"{as_installed[-300:]}")
    learner = _jupyter(tmp_path, config, str(jupyter), "labextension", "list")
    assert "disabled" in _nbgrader_line(learner), learner

    servers = {name: json.loads(_jupyter(tmp_path, path, sys.executable, "-c", _SERVER_EXTENSIONS).splitlines()[-1])
               for name, path in {"instructor": None, "learner": config}.items()}
    assert servers["instructor"] and all(servers["instructor"].values()), servers  # formgrader and the rest load
    assert servers["learner"].keys() == servers["instructor"].keys() and not any(servers["learner"].values()), servers


def test_the_instructors_lab_is_documented_with_its_make_target():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^instructor-lab: setup$", makefile, re.M)
    guide = (ROOT / "docs" / "instructors.md").read_text()
    assert "make instructor-lab" in guide and "jupyter-learner" in guide


_PAGE_CONFIG = """
import json, logging
from jupyter_core.paths import jupyter_path
from jupyterlab_server.config import get_page_config
off = get_page_config(jupyter_path("labextensions"), logger=logging.getLogger()).get("disabledExtensions", {})
print(json.dumps(off if isinstance(off, dict) else {name: True for name in off}))
"""
#: The plugin that asks "Would you like to get notified about official Jupyter news?" over every notebook.
NEWS = "@jupyterlab/apputils-extension:announcements"


def test_the_learners_lab_asks_no_news_question(tmp_path):
    pytest.importorskip("jupyterlab", reason="JupyterLab is the course extra's")
    core = list(Path(sys.prefix, "share", "jupyter", "lab", "static").glob("jlab_core.*.js"))
    if core:  # the plugin's id is the one this JupyterLab has (a renamed plugin would make the setting a no-op)
        assert any(f'id:"{NEWS}"' in p.read_text(errors="ignore") for p in core)
    disabled = {name: json.loads(_jupyter(tmp_path, path, sys.executable, "-c", _PAGE_CONFIG).strip().splitlines()[-1])
                for name, path in {"instructor": None, "learner": _learner_config_path()}.items()}
    assert disabled["learner"].get(NEWS) is True and NEWS not in disabled["instructor"], disabled
