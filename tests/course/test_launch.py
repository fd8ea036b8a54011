"""One-click launch: links made from one repository URL, the install cell in every notebook, a notebook run alone."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asynclab.course import launch
from asynclab.course.registry import written

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))


def _notebook(item) -> dict:
    return json.loads((ROOT / "notebooks" / item.notebook).read_text())


def test_the_repository_is_the_one_pyproject_sets():
    urls = re.search(r"^\[project\.urls\]\n(.*?)(?:\n\[|\Z)", (ROOT / "pyproject.toml").read_text(), re.M | re.S).group(1)
    assert f'Repository = "{launch.repository()}"' in urls


def test_every_notebook_has_its_links_install_cell_and_gpu_request():
    import launch_cells

    assert launch_cells.main(["--check"]) == 0, "run scripts/launch_cells.py"
    for item in written():
        nb = _notebook(item)
        title = "".join(nb["cells"][0]["source"])
        assert launch.colab_url(item.notebook) in title and launch.kaggle_url(item.notebook) in title, item.notebook
        first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        assert "".join(first_code["source"]) == launch.install_cell(), item.notebook
        assert first_code["metadata"]["jupyter"]["source_hidden"] is True, item.notebook  # folded to its first line
        assert launch.install_cell().startswith("# On Colab or Kaggle: install this course's package")
        assert nb["metadata"]["accelerator"] == "GPU" and nb["metadata"]["colab"]["gpuType"] == "T4"


def test_every_launch_link_in_the_project_points_at_the_repository():
    texts = [(ROOT / "README.md").read_text()] + [(ROOT / "notebooks" / x.notebook).read_text() for x in written()]
    links = [link for text in texts for link in re.findall(r"https://colab\.research\.google\.com/github/[^)\s\"]+|"
                                                            r"https://kaggle\.com/kernels/welcome\?src=[^)\s\"]+", text)]
    assert len(links) >= 4 * len(written())  # two in each notebook, two in the README's lesson map
    for link in links:
        notebook = link.rsplit("/", 1)[-1]
        assert link in (launch.colab_url(notebook), launch.kaggle_url(notebook)), link
    readme = (ROOT / "README.md").read_text()
    assert all(launch.colab_url(x.notebook) in readme and launch.kaggle_url(x.notebook) in readme for x in written())


def test_the_runtime_hint_names_the_platform(monkeypatch):
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    assert launch.runtime_hint(1, 0) is None
    monkeypatch.setenv("COLAB_RELEASE_TAG", "test")
    assert "Change runtime type" in launch.runtime_hint(1, 0) and launch.runtime_hint(1, 1) is None
    assert "replays its reference" in launch.runtime_hint(2, 1)
    monkeypatch.delenv("COLAB_RELEASE_TAG")
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    assert "Accelerator" in launch.runtime_hint(2, 0)


def _venv_without_asynclab(folder: Path) -> Path:
    """A fresh venv that sees this interpreter's packages (torch, Jupyter...) but not asynclab, as Colab would."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    theirs = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    import sysconfig

    skip = {ROOT, ROOT / "src", ROOT / "tests", ROOT / "scripts"}
    stdlib = str(Path(sysconfig.get_paths()["stdlib"]).resolve())
    ours = [p for p in sys.path if p and Path(p).is_dir() and Path(p).resolve() not in skip
            and not str(Path(p).resolve()).startswith(stdlib) and not (Path(p) / "asynclab").exists()]
    (Path(theirs) / "course_host.pth").write_text("\n".join(dict.fromkeys(ours)) + "\n")
    return python


def test_a_notebook_alone_installs_the_course_on_colab_and_keeps_torch(tmp_path, monkeypatch):
    """The notebook copied alone into an empty folder runs to the end in a fresh venv without asynclab, with
    COLAB_RELEASE_TAG set and ASYNCLAB_SOURCE pointing at this checkout; torch is the same version afterwards."""
    import nbformat
    import torch
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    python = _venv_without_asynclab(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    probe = [str(python), "-c", "import importlib.util, torch; print(torch.__version__, bool(importlib.util.find_spec('asynclab')))"]
    assert subprocess.run(probe, capture_output=True, text=True, env=env, check=True).stdout.split() == [torch.__version__, "False"]
    alone = tmp_path / "empty"
    alone.mkdir()
    shutil.copy(ROOT / "notebooks" / "01_async_dispatch.ipynb", alone)
    env.update({"COLAB_RELEASE_TAG": "test", "ASYNCLAB_SOURCE": str(ROOT), "MPLBACKEND": "agg",
                # build the checkout with the setuptools already here (pip's 0 means "no isolation"), so that the
                # test needs no package index: what it tests is the install cell, not pip's build isolation
                "PIP_NO_BUILD_ISOLATION": "0"})
    spec = tmp_path / "jupyter" / "kernels" / "alone"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": [str(python), "-m", "ipykernel_launcher", "-f",
                                                           "{connection_file}"], "display_name": "alone",
                                                  "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    km = KernelManager(kernel_name="alone")
    nb = nbformat.read(alone / "01_async_dispatch.ipynb", as_version=4)
    NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": str(alone)}}).execute(env=env)
    assert subprocess.run(probe, capture_output=True, text=True, env=env, check=True).stdout.split() == [torch.__version__, "True"]
    report = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    assert "lesson 01:" in report
    assert sorted(p.name for p in alone.iterdir() if p.suffix == ".ipynb") == ["01_async_dispatch.ipynb"]


def test_the_readme_links_the_book_where_the_site_workflow_publishes_it():
    assert launch.book_url() == "https://asynclab.github.io/asynclab/"
    assert f"<{launch.book_url()}>" in (ROOT / "README.md").read_text()
    assert "actions/deploy-pages" in (ROOT / ".github" / "workflows" / "site.yml").read_text()


def test_a_lesson_still_being_written_is_in_the_lesson_map_only(monkeypatch, tmp_path):
    """CONTRIBUTING: a lesson registered with ``ready=False`` has no notebook yet; nothing may need one."""
    import build_site
    import launch_cells

    from asynclab.grading import classroom

    from asynclab.course import registry as lessons
    from asynclab.gpu.hardware import Hardware

    extra = lessons.Lesson("08", "newthing", "A lesson still being written", 1, None, False)
    monkeypatch.setattr(lessons, "LESSONS", lessons.LESSONS + (extra,))
    assert extra not in written() and len(written()) == len(lessons.LESSONS) - 1
    assert "notebook not written yet" in lessons.lesson_map(Hardware(gpus=())).splitlines()[-1]
    assert launch_cells.main(["--check"]) == 0
    assert "newthing" not in build_site.lesson_map() + build_site.toc()
    assert "newthing" not in classroom.lesson_table(ROOT / "notebooks")
    assert not any("newthing" in str(p) for p in classroom.write_source(tmp_path, ROOT / "notebooks"))


def test_the_readmes_first_code_block_is_the_learners_path():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Get it and run it", 1)[1].split("\n## ", 1)[0]
    clone = section.index(f"git clone {launch.repository()}.git")
    # the learner's path first: clone, then the lab; then the two commands that run and test the course
    assert clone < section.index("make lab      #") < section.index("make course   #") < section.index("make test     #")
    assert "two commands run the course and test it" in section
    assert section.index("```bash") < clone < section.index("make lab      #") < section.index("```", clone)
