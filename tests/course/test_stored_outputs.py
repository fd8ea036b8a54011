"""The README says which GPUs each notebook's stored outputs were executed on: the hardware report each notebook
stored names the same GPUs."""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def stored_gpus(notebook: Path) -> list[str]:
    """The GPUs the notebook's stored hardware report lists, in order."""
    text = ""
    for cell in json.loads(notebook.read_text())["cells"]:
        for out in cell.get("outputs", []):
            part = out.get("text", "")
            text += "".join(part) if isinstance(part, list) else part
    return [name for _, name in sorted(set(re.findall(r"^  GPU (\d+): (NVIDIA [^,]+),", text, re.M)))]


def readme_executions(readme: str) -> dict[str, list[str]]:
    """Lesson -> the GPUs the README says its stored outputs ran on, from its phrases "lessons 00–05 and 08 executed
    on one NVIDIA H200" and "lesson 06 executed on two NVIDIA H100s".

    Example:
        >>> readme_executions("lessons 00–02 and 08 executed on one NVIDIA H200; lesson 06 executed on two NVIDIA H100s")
        {'00': ['NVIDIA H200'], '01': ['NVIDIA H200'], '02': ['NVIDIA H200'], '08': ['NVIDIA H200'], '06': ['NVIDIA H100 80GB HBM3', 'NVIDIA H100 80GB HBM3']}
    """
    names = {"H200": "NVIDIA H200", "H100": "NVIDIA H100 80GB HBM3"}
    out: dict[str, list[str]] = {}
    for lessons, count, card in re.findall(r"lessons? ([\d–, and]+?) executed on (one|two) NVIDIA (H\d00)", readme):
        numbers = []
        for part in re.findall(r"\d\d(?:–\d\d)?", lessons):
            lo, _, hi = part.partition("–")
            numbers += [f"{n:02d}" for n in range(int(lo), int(hi or lo) + 1)]
        for n in numbers:
            out[n] = [names[card]] * (1 if count == "one" else 2)
    return out


def test_the_readme_names_the_gpus_each_notebook_was_executed_on():
    said = readme_executions((ROOT / "README.md").read_text())
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) == 9 and sorted(said) == [nb.name[:2] for nb in notebooks], sorted(said)
    for nb in notebooks:
        gpus, expected = stored_gpus(nb), said[nb.name[:2]]
        assert gpus == expected, f"{nb.name}: stored outputs from {gpus}, the README says {expected}"
