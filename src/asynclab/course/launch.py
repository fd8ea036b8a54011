"""Where learners open the course: the repository URL (from the package's metadata), Colab and Kaggle links, the install cell."""
from __future__ import annotations

import re
from pathlib import Path

#: The Colab and Kaggle badges the notebooks and the README show.
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
KAGGLE_BADGE = "https://kaggle.com/static/images/open-in-kaggle.svg"

#: The first code cell of every notebook. A notebook opened from a link is alone: on Colab or Kaggle this cell
#: installs the course's package from ``ASYNCLAB_SOURCE`` (a pip requirement; default: the repository), with the
#: platform's torch and torchvision held at their versions, and d2l without its old pins when it is missing.
#: Anywhere else, or where asynclab is already installed, it does nothing and prints nothing.
INSTALL_CELL = '''\
# On Colab or Kaggle: install this course's package, keeping the platform's own torch. Elsewhere: nothing.
import importlib.util, os, subprocess, sys, tempfile
if (os.environ.get("COLAB_RELEASE_TAG") or os.environ.get("KAGGLE_KERNEL_RUN_TYPE")) and not importlib.util.find_spec("asynclab"):
    from importlib.metadata import version
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as keep:  # pip may not change these two
        keep.write(f"torch=={version('torch')}\\ntorchvision=={version('torchvision')}\\n")
    pip = [sys.executable, "-m", "pip", "install", "-q", "-c", keep.name]
    subprocess.run(pip + [os.environ.get("ASYNCLAB_SOURCE", "git+{repository}")], check=True)
    if not importlib.util.find_spec("d2l"):
        subprocess.run(pip + ["--no-deps", "d2l==1.0.3"], check=True)
    importlib.invalidate_caches()'''


def repository() -> str:
    """The project's public home, as ``pyproject.toml`` ``[project.urls]`` sets it (``Repository``).

    Read from the installed package's metadata, or from ``pyproject.toml`` beside a source checkout.

    Example:
        >>> repository().startswith("https://github.com/")
        True
    """
    from importlib import metadata

    try:
        urls = metadata.metadata("asynclab").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        urls = []
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "repository":
            return url.strip().rstrip("/")
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    if pyproject.is_file():
        found = re.search(r'^Repository\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
        if found:
            return found.group(1).rstrip("/")
    raise RuntimeError("asynclab: no Repository URL in the package's metadata or in pyproject.toml [project.urls]")


def book_url() -> str:
    """Where ``.github/workflows/site.yml`` publishes the book: the repository's GitHub Pages address.

    Example:
        >>> book_url()
        'https://asynclab.github.io/asynclab/'
    """
    owner, name = repository().split("github.com/", 1)[1].split("/")[:2]
    return f"https://{owner.lower()}.github.io/{name}/"


def colab_url(notebook: str) -> str:
    """The link that opens ``notebooks/<notebook>`` of the repository in Colab.

    Example:
        >>> colab_url("03_streams.ipynb").split("/github/")[0]
        'https://colab.research.google.com'
    """
    owner_name = repository().removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{owner_name}/blob/main/notebooks/{notebook}"


def kaggle_url(notebook: str) -> str:
    """The link that opens ``notebooks/<notebook>`` of the repository in Kaggle.

    Example:
        >>> kaggle_url("03_streams.ipynb").startswith("https://kaggle.com/kernels/welcome?src=https://github.com/")
        True
    """
    return f"https://kaggle.com/kernels/welcome?src={repository()}/blob/main/notebooks/{notebook}"


def badges(notebook: str) -> str:
    """The two launch badges of a notebook, as Markdown.

    Example:
        >>> badges("00_welcome.ipynb").count("](https://")
        4
    """
    return (f"[![Open in Colab]({COLAB_BADGE})]({colab_url(notebook)}) "
            f"[![Open in Kaggle]({KAGGLE_BADGE})]({kaggle_url(notebook)})")


def install_cell() -> str:
    """The text of every notebook's first code cell (:data:`INSTALL_CELL` with the repository filled in).

    Example:
        >>> "ASYNCLAB_SOURCE" in install_cell() and "{repository}" not in install_cell()
        True
    """
    return INSTALL_CELL.replace("{repository}", repository())


def runtime_hint(gpus_needed: int, gpus_here: int) -> str | None:
    """What to tell a learner on Colab or Kaggle whose runtime has fewer GPUs than a lesson runs live on.

    Example:
        >>> import os
        >>> os.environ["COLAB_RELEASE_TAG"] = "test"
        >>> runtime_hint(1, 0)
        'Colab: this runtime has no GPU. Runtime > Change runtime type > T4 GPU, then run the notebook again.'
        >>> del os.environ["COLAB_RELEASE_TAG"]
    """
    import os

    if gpus_here >= gpus_needed:
        return None
    if os.environ.get("COLAB_RELEASE_TAG"):
        if gpus_here == 0:
            return "Colab: this runtime has no GPU. Runtime > Change runtime type > T4 GPU, then run the notebook again."
        return f"Colab gives one GPU; this lesson needs {gpus_needed} to run live, so it replays its reference."
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE"):
        if gpus_here == 0:
            return ("Kaggle: this session has no GPU. Settings > Accelerator > GPU T4 x2 (phone verification needed), "
                    "then run the notebook again.")
        return f"this Kaggle session has {gpus_here} GPU(s); this lesson needs {gpus_needed} to run live."
    return None
