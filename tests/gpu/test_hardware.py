"""The hardware inventory never fails and reports what it finds."""
import asynclab as al
from asynclab.gpu import hardware
from asynclab.gpu.hardware import GPU, Hardware

H100 = GPU(0, "NVIDIA H100 80GB HBM3", 79.2, 132, "9.0")


def test_inventory_matches_torch():
    import torch

    hw = al.inventory()
    assert hw.gpu_count == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert hw.torch_version == torch.__version__
    assert hw.mode == {0: "no-gpu", 1: "one-gpu"}.get(hw.gpu_count, "multi-gpu")


def test_modes_and_live():
    two = Hardware(gpus=(H100, GPU(1, "NVIDIA H100 80GB HBM3", 79.2, 132, "9.0")), p2p=((True, True), (True, True)))
    assert Hardware().mode == "no-gpu" and not Hardware().live(1)
    assert Hardware(gpus=(H100,)).mode == "one-gpu"
    assert Hardware(gpus=(H100,)).live(1) and not Hardware(gpus=(H100,)).live(2)
    assert two.mode == "multi-gpu" and two.live(2)


def test_report_lists_gpus_p2p_and_mode():
    two = Hardware(gpus=(H100, GPU(1, "NVIDIA H100 80GB HBM3", 79.2, 132, "9.0")),
                   p2p=((True, False), (True, True)), topology="GPU0 X NV18\nGPU1 NV18 X",
                   driver="580.1", torch_version="2.11.0", cuda_version="13.0")
    text = hardware.report(two)
    assert "GPU 1: NVIDIA H100 80GB HBM3, 79 GiB, 132 SMs, compute capability 9.0" in text
    assert "torch 2.11.0 (CUDA 13.0), driver 580.1" in text
    assert "GPU0      self    no" in text  # 0 -> 1 not accessible
    assert "NV18" in text
    assert text.splitlines()[-1] == "mode: " + hardware.MODE_TEXT["multi-gpu"]
    assert "no CUDA GPU visible" in hardware.report(Hardware())


def test_no_nvidia_smi_is_fine(monkeypatch):
    monkeypatch.setattr(hardware.shutil, "which", lambda name: None)
    assert hardware._run(["nvidia-smi"]) is None
    hw = hardware.inventory()
    assert hw.driver is None and hw.topology is None


def test_driver_version_from_the_kernel_module_without_a_process(monkeypatch, tmp_path):
    monkeypatch.setattr(hardware, "_run", lambda cmd, timeout=10.0: (_ for _ in ()).throw(AssertionError(cmd)))
    for text, version in [("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Release Build  (dvs)", "580.159.04"),
                          ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build", "570.86.15")]:
        (tmp_path / "version").write_text(text + "\nGCC version:  gcc version 12.3.0\n")
        monkeypatch.setattr(hardware, "_NVRM", tmp_path / "version")
        assert hardware.driver_version() == version


def test_driver_version_falls_back_to_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setattr(hardware, "_NVRM", tmp_path / "absent")
    monkeypatch.setattr(hardware, "_run", lambda cmd, timeout=10.0: "580.1\n580.1" if cmd[0] == "nvidia-smi" else None)
    assert hardware.driver_version() == "580.1"
    monkeypatch.setattr(hardware, "_run", lambda cmd, timeout=10.0: None)
    assert hardware.driver_version() is None


def test_hanging_or_failing_command_is_none():
    assert hardware._run(["false"]) is None
    assert hardware._run(["sleep", "5"], timeout=0.2) is None
    assert hardware._run(["echo", "hi"]) == "hi"


def test_cli_hardware(capsys):
    from asynclab.cli import main

    assert main(["hardware"]) == 0
    assert capsys.readouterr().out.startswith("asynclab hardware report")


def test_topology_report_drops_escape_codes_and_unused_legend():
    from pathlib import Path

    from asynclab.gpu.hardware import clean_topology

    raw = (Path(__file__).parents[1] / "fixtures" / "nvidia_smi_topo_2gpu.txt").read_text()
    assert "\x1b[" in raw and "PHB  =" in raw  # as nvidia-smi printed it on 2x H200
    out = clean_topology(raw)
    assert "\x1b" not in out
    lines = out.splitlines()
    assert lines[1].split("\t")[:3] == ["GPU0", " X ", "NV18"]
    legend = lines[lines.index("Legend:") + 1:]
    assert [x.split("=")[0].strip() for x in legend] == ["X", "NV#"]
    assert clean_topology("GPU0\tGPU1\nGPU0\t X \tSYS\nGPU1\tSYS\t X \n\nLegend:\n  X = Self\n"
                          "  SYS  = Connection traversing PCIe\n  NV#  = NVLinks").endswith("SYS  = Connection traversing PCIe")


def test_nvlink_links_and_peak_from_the_recorded_topology():
    from pathlib import Path

    from asynclab.gpu.hardware import clean_topology, nvlink_links, nvlink_peak_gbps

    raw = (Path(__file__).parents[1] / "fixtures" / "nvidia_smi_topo_2gpu.txt").read_text()
    for text in (raw, clean_topology(raw)):
        assert nvlink_links(text) == {(0, 1): 18, (1, 0): 18}
    assert nvlink_peak_gbps(18, 9) == 450.0 and nvlink_peak_gbps(12, 8) == 300.0
    assert nvlink_peak_gbps(18, 7) is None and nvlink_links(None) == {}


def test_memory_cap_is_queued_in_every_process_that_imports_torch():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "ASYNCLAB_GPU_MEMORY_GIB": "6",
           "PYTHONPATH": os.pathsep.join([str(root / "scripts" / "memcap"), str(root / "src")])}
    code = "import torch; print(any('cap_memory' in getattr(c[0], '__qualname__', '') for c in torch.cuda._queued_calls))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_memory_cap_sets_each_gpus_fraction(monkeypatch):
    import types

    import pytest
    import torch

    from asynclab.gpu.hardware import _cap_memory, cap_memory_when_cuda_starts

    set_to = {}
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(total_memory=(80 if i else 4) * 2**30))
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, i: set_to.__setitem__(i, f))
    _cap_memory(6)
    assert set_to == {0: 1.0, 1: 6 / 80}  # a 4 GiB GPU keeps all of it
    with pytest.raises(ValueError, match="positive"):
        cap_memory_when_cuda_starts(0)
