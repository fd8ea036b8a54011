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


def test_the_readme_names_the_gpus_each_notebook_was_executed_on():
    readme = (ROOT / "README.md").read_text()
    claim = re.search(r"from one live run of the course on two NVIDIA H200s over NVLink, .*?except lessons ([\d, and]+), "
                      r"executed again on one NVIDIA H100", readme)
    assert claim, "the README no longer says which GPUs the stored outputs come from"
    again = set(re.findall(r"\d\d", claim.group(1)))
    pair = re.search(r"and lessons ([\d, and]+), executed again on two NVIDIA H100s", readme)
    again_on_two = set(re.findall(r"\d\d", pair.group(1))) if pair else set()
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) == 9
    for nb in notebooks:
        gpus = stored_gpus(nb)
        expected = (["NVIDIA H100 80GB HBM3"] if nb.name[:2] in again else ["NVIDIA H100 80GB HBM3"] * 2
                    if nb.name[:2] in again_on_two else ["NVIDIA H200", "NVIDIA H200"])
        assert gpus == expected, f"{nb.name}: stored outputs from {gpus}, the README says {expected}"
