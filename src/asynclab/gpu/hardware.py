"""Hardware inventory: GPUs, P2P access, topology and versions, and the course mode they imply."""
from __future__ import annotations

import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

CPU, ONE_GPU, MULTI_GPU = "no-gpu", "one-gpu", "multi-gpu"
#: ``Hardware.torch_version`` of an inventory taken without importing torch.
NO_TORCH = "not imported"

MODE_TEXT = {
    CPU: "no GPU: measurement cells replay references recorded on real NVIDIA GPUs; CPU experiments run live",
    ONE_GPU: "one GPU: single-GPU lessons run live; multi-GPU parts replay the 2-GPU reference",
    MULTI_GPU: "two or more GPUs: everything runs live",
}


@dataclass(frozen=True)
class GPU:
    """One CUDA device as torch sees it."""

    index: int
    name: str
    memory_gib: float
    sm_count: int
    capability: str

    def __str__(self) -> str:
        return (f"GPU {self.index}: {self.name}, {self.memory_gib:.0f} GiB, "
                f"{self.sm_count} SMs, compute capability {self.capability}")


@dataclass(frozen=True)
class Hardware:
    """What this machine has, as far as the course cares.

    Example:
        >>> hw = Hardware(gpus=())
        >>> hw.mode, hw.gpu_count
        ('no-gpu', 0)
    """

    gpus: tuple[GPU, ...] = ()
    p2p: tuple[tuple[bool, ...], ...] = ()
    topology: str | None = None
    driver: str | None = None
    torch_version: str = "not installed"
    cuda_version: str | None = None
    python_version: str = field(default_factory=platform.python_version)
    platform: str = field(default_factory=platform.platform)

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def mode(self) -> str:
        """``"no-gpu"``, ``"one-gpu"`` or ``"multi-gpu"``."""
        return CPU if not self.gpus else ONE_GPU if len(self.gpus) == 1 else MULTI_GPU

    def named(self, count: int = 1) -> str:
        """The first ``count`` GPUs by name, as a recording names its card: ``"NVIDIA H200"``, ``"2x NVIDIA H200"``.

        Example:
            >>> Hardware(gpus=(GPU(0, "NVIDIA H200", 140.0, 132, "9.0"),) * 2).named(2)
            '2x NVIDIA H200'
            >>> Hardware(gpus=(GPU(0, "A", 1.0, 1, "9.0"), GPU(1, "B", 1.0, 1, "9.0"))).named(2)
            'A + B'
        """
        names = [gpu.name for gpu in self.gpus[:max(1, count)]]
        if len(set(names)) == 1:
            return names[0] if len(names) == 1 else f"{len(names)}x {names[0]}"
        return " + ".join(names)

    def live(self, gpus_needed: int) -> bool:
        """True when an experiment that needs ``gpus_needed`` GPUs can run live here.

        Example:
            >>> Hardware(gpus=()).live(0), Hardware(gpus=()).live(1)
            (True, False)
        """
        return self.gpu_count >= gpus_needed


def _run(cmd: list[str], timeout: float = 10.0) -> str | None:
    """Output of a command, or None if it is missing, fails or hangs."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def _gpus(torch) -> tuple[GPU, ...]:
    gpus = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        gpus.append(GPU(i, p.name, p.total_memory / 2**30, p.multi_processor_count, f"{p.major}.{p.minor}"))
    return tuple(gpus)


def _p2p(torch, n: int) -> tuple[tuple[bool, ...], ...]:
    return tuple(tuple(i == j or bool(torch.cuda.can_device_access_peer(i, j)) for j in range(n)) for i in range(n))


#: PCIe generation -> (transfer rate per lane in GT/s, payload bits per transferred bit after line encoding).
_PCIE_GENERATIONS = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130),
                     5: (32.0, 128 / 130), 6: (64.0, 242 / 256)}


def pcie_peak_gbps(gen: int, width: int) -> float:
    """The PCIe link's raw peak in GB/s per direction: lanes x transfer rate x line encoding, before packet overheads.

    Example:
        >>> round(pcie_peak_gbps(5, 16), 1), round(pcie_peak_gbps(4, 16), 1)
        (63.0, 31.5)
    """
    if gen not in _PCIE_GENERATIONS:
        raise ValueError(f"PCIe generation {gen!r} is not one of {sorted(_PCIE_GENERATIONS)}")
    if int(width) < 1:
        raise ValueError(f"a PCIe link has at least 1 lane, not {width!r}")
    rate, encoding = _PCIE_GENERATIONS[gen]
    return rate * encoding * int(width) / 8.0


def pcie_link(index: int = 0) -> tuple[int, int] | None:
    """``(generation, lanes)`` of GPU ``index``'s PCIe link at its maximum, as the driver reports it, or None
    without nvidia-smi (idle links train down to save power, so the current figures can be lower).

    Example:
        >>> pcie_link(0)  # doctest: +SKIP
        (5, 16)
    """
    out = _run(["nvidia-smi", f"--id={int(index)}", "--query-gpu=pcie.link.gen.max,pcie.link.width.max",
                "--format=csv,noheader,nounits"])
    try:
        gen, width = (int(v) for v in out.splitlines()[0].split(","))
    except (AttributeError, ValueError, IndexError):
        return None
    return gen, width


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LEGEND_LINE = re.compile(r"^\s*(\S+)\s+=\s")


def clean_topology(text: str) -> str:
    r"""``nvidia-smi topo -m`` made readable: no terminal escape codes, trailing blanks trimmed, and its legend
    cut to the link types the matrix uses ("NV#" stands for every NV18, NV4...).

    Example:
        >>> raw = ("\x1b[4m\tGPU0\tGPU1\x1b[0m\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n\nLegend:\n\n"
        ...        "  X    = Self\n  SYS  = Connection traversing PCIe and the SMP interconnect\n"
        ...        "  NV#  = Connection traversing a bonded set of # NVLinks")
        >>> clean_topology(raw).splitlines()
        ['\tGPU0\tGPU1', 'GPU0\t X \tNV18', 'GPU1\tNV18\t X', '', 'Legend:', '  X    = Self', '  NV#  = Connection traversing a bonded set of # NVLinks']
    """
    text = _ANSI.sub("", text)
    lines = [line.rstrip() for line in text.splitlines()]
    cut = next((i for i, line in enumerate(lines) if line.strip() == "Legend:"), len(lines))
    matrix = lines[:cut]
    while matrix and not matrix[-1].strip():
        matrix.pop()
    cells = {c.strip() for row in matrix[1:] for c in row.split("\t")[1:]}
    used = {("NV#" if re.fullmatch(r"NV\d+", c) else c) for c in cells}
    legend = [line for line in lines[cut + 1:]
              if (m := _LEGEND_LINE.match(line)) and m.group(1) in used]
    return "\n".join(matrix + (["", "Legend:"] + legend if legend else []))


def _smi_gpus() -> tuple[GPU, ...]:
    """The GPUs as nvidia-smi lists them (no SM count without CUDA: 0)."""
    out = _run(["nvidia-smi", "--query-gpu=index,name,memory.total,compute_cap", "--format=csv,noheader,nounits"])
    gpus = []
    for line in (out or "").splitlines():
        try:
            idx, name, mem, cap = (x.strip() for x in line.split(","))
            gpus.append(GPU(int(idx), name, float(mem) / 1024.0, 0, cap))
        except ValueError:
            continue
    return tuple(gpus)


#: Where Linux's NVIDIA kernel module says its version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05 ...").
_NVRM = Path("/proc/driver/nvidia/version")


def driver_version() -> str | None:
    """The NVIDIA driver's version: from the kernel module where Linux has it (no process started: a notebook's
    first cell and every graded check pay for nvidia-smi otherwise), else from nvidia-smi; None without either.

    Example:
        >>> driver_version()  # doctest: +SKIP
        '580.159.04'
    """
    try:
        found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", _NVRM.read_text())
    except OSError:
        found = None
    if found:
        return found.group(1)
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return out.splitlines()[0] if out else None


def inventory(use_torch: bool = True) -> Hardware:
    """Inspect this machine. Never raises: without torch, CUDA or nvidia-smi it reports what it can.

    ``use_torch=False`` asks only nvidia-smi (GPUs, driver, topology; no P2P matrix), which takes a
    fraction of a second where importing torch takes seconds.

    Example:
        >>> hw = inventory()
        >>> hw.mode in ("no-gpu", "one-gpu", "multi-gpu")
        True
    """
    if not use_torch:
        gpus = _smi_gpus()
        return Hardware(gpus=gpus, topology=_topology(len(gpus)), driver=driver_version() if gpus else None,
                        torch_version=NO_TORCH)
    try:
        import torch
    except ImportError:
        return Hardware()
    gpus: tuple[GPU, ...] = ()
    p2p: tuple[tuple[bool, ...], ...] = ()
    try:
        if torch.cuda.is_available():
            gpus = _gpus(torch)
            p2p = _p2p(torch, len(gpus))
    except Exception:  # noqa: BLE001 - a broken driver must not stop the course
        gpus, p2p = (), ()
    return Hardware(
        gpus=gpus,
        p2p=p2p,
        topology=_topology(len(gpus)),
        driver=driver_version() if gpus else None,
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda,
    )


def _topology(n_gpus: int) -> str | None:
    raw = _run(["nvidia-smi", "topo", "-m"]) if n_gpus > 1 else None
    return clean_topology(raw) if raw else None


#: NVLink bandwidth per link and direction, GB/s, by the GPU's compute capability major (NVIDIA's figures:
#: NVLink 3 on Ampere and NVLink 4 on Hopper carry 25 GB/s per link each way, NVLink 5 on Blackwell 50).
NVLINK_GBPS_PER_LINK = {8: 25.0, 9: 25.0, 10: 50.0}


def nvlink_links(topology: str | None) -> dict[tuple[int, int], int]:
    r"""NVLink links between each pair of GPUs, read from ``nvidia-smi topo -m`` ("NV18": 18 bonded links).

    Example:
        >>> nvlink_links("\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X ")
        {(0, 1): 18, (1, 0): 18}
    """
    links: dict[tuple[int, int], int] = {}
    for line in (topology or "").splitlines():
        cells = line.split("\t")
        row = re.fullmatch(r"GPU(\d+)", cells[0].strip())
        if not row:
            continue
        for j, cell in enumerate(cells[1:]):
            m = re.fullmatch(r"NV(\d+)", cell.strip())
            if m:
                links[(int(row.group(1)), j)] = int(m.group(1))
    return links


def nvlink_peak_gbps(links: int, capability_major: int) -> float | None:
    """Peak GB/s each way over ``links`` NVLink links of a GPU of that compute capability (None if unknown).

    Example:
        >>> nvlink_peak_gbps(18, 9)  # an H100 or H200 pair, NV18
        450.0
    """
    per_link = NVLINK_GBPS_PER_LINK.get(int(capability_major))
    return None if per_link is None or links <= 0 else links * per_link


def p2p_table(hw: Hardware) -> str:
    """The peer-to-peer access matrix as text (row = from, column = to).

    Example:
        >>> g = GPU(0, "X", 1.0, 1, "9.0")
        >>> print(p2p_table(Hardware(gpus=(g, g), p2p=((True, True), (True, True)))))
        from\\to   GPU0  GPU1
        GPU0      self   yes
        GPU1       yes  self
    """
    n = hw.gpu_count
    if n < 2 or not hw.p2p:
        return "(P2P needs two or more GPUs)"
    lines = ["from\\to " + "".join(f"{'GPU' + str(j):>6}" for j in range(n))]
    for i in range(n):
        cells = "".join(f"{'self' if i == j else ('yes' if hw.p2p[i][j] else 'no'):>6}" for j in range(n))
        lines.append(f"GPU{i}    " + cells)
    return "\n".join(lines)


def report(hw: Hardware | None = None) -> str:
    """A short, friendly hardware report; every notebook shows it first.

    Example:
        >>> print(report(Hardware(gpus=(), torch_version="2.11.0")).splitlines()[0])
        asynclab hardware report
    """
    hw = hw or inventory()
    lines = ["asynclab hardware report", "------------------------"]
    if hw.gpus:
        lines += [f"  {g}" for g in hw.gpus]
    else:
        lines.append("  no NVIDIA GPU found by nvidia-smi" if hw.torch_version == NO_TORCH
                     else "  no CUDA GPU visible to torch")
    if hw.torch_version == NO_TORCH:
        torch_text = "torch not imported (--no-torch)"
    else:
        torch_text = f"torch {hw.torch_version} ({f'CUDA {hw.cuda_version}' if hw.cuda_version else 'CPU-only build'})"
    lines.append(f"  {torch_text}, driver {hw.driver or 'n/a'}, Python {hw.python_version}")
    if hw.gpu_count > 1:
        if hw.p2p:
            lines.append("  P2P access:")
            lines += ["    " + row for row in p2p_table(hw).splitlines()]
        if hw.topology:
            lines.append("  topology (nvidia-smi topo -m):")
            lines += ["    " + row for row in hw.topology.splitlines()]
    lines.append(f"mode: {MODE_TEXT[hw.mode]}")
    return "\n".join(lines)


def _cap_memory(gib: float) -> None:
    """Cap this process's share of every visible GPU at ``gib`` GiB (``torch.cuda.set_per_process_memory_fraction``)."""
    import torch

    for i in range(torch.cuda.device_count()):
        total = torch.cuda.get_device_properties(i).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, gib * 2**30 / total), i)


def cap_memory_when_cuda_starts(gib: float) -> None:
    """From now on, cap this process's memory on each GPU at ``gib`` GiB as soon as CUDA starts in it (when torch
    is imported later, the cap is queued then): the GPU check runs every lesson so, to prove it fits a small GPU.

    Example:
        >>> cap_memory_when_cuda_starts(6)  # doctest: +SKIP
    """
    import importlib.abc
    import importlib.machinery
    import sys

    if not gib > 0:
        raise ValueError(f"a memory cap must be a positive number of GiB, not {gib!r}")

    def queue(torch) -> None:
        torch.cuda._lazy_call(lambda: _cap_memory(gib))

    if "torch" in sys.modules:
        queue(sys.modules["torch"])
        return

    class AfterTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            run = spec.loader.exec_module

            def exec_module(module) -> None:
                run(module)
                queue(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, AfterTorch())
