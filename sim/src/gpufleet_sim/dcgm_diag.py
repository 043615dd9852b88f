"""What DCGM's diagnostic (``dcgmi diag -r N``) finds on a simulated node: per test, per GPU, a status
and DCGM's own messages (DCGM_FR_* codes and texts of dcgm_errors.h).

Levels (DCGM 3): 1 runs the deployment (software) checks; 2 adds PCIe (PCIe/NVLink bandwidth and link
checks) and GPU Memory; 3 adds Diagnostic, Targeted Stress, Targeted Power and Memory Bandwidth; 4 adds
Memtest and Pulse Test. What fails where DCGM would:

- row-remap-pending (a pending row remap) and a row remap failure: ``Page Retirement/Row Remap``
  (level 1 and up), DCGM_FR_PENDING_ROW_REMAP / DCGM_FR_ROW_REMAP_FAILURE;
- a GPU off the bus (gpu-missing, xid-79): ``Permissions and OS-related Blocks`` warns that NVML and
  /dev disagree (DCGM_FR_DEVICE_COUNT_MISMATCH); the other tests run on the GPUs NVML still lists;
- uncorrectable volatile ECC errors (ecc-uncorrectable, xid-94): ``GPU Memory`` (level 2 and up),
  DCGM_FR_VOLATILE_DBE_DETECTED;
- dcgm-diag-fail: ``GPU Memory`` finds faulty memory elements on GPU 2 (DCGM_FR_FAULTY_MEMORY), and at
  level 4 Memtest too; no other tool shows anything;
- pcie-degraded: ``PCIe`` (level 2 and up), the link width and, under its load, the generation below
  the profile's (DCGM_FR_PCIE_WIDTH / DCGM_FR_PCIE_GENERATION, whose real texts say "link generation"
  for the width too);
- nvlink-down: ``PCIe`` (its NVLink checks), DCGM_FR_NVLINK_DOWN per inactive link.

Stdlib only: the fake dcgmi runs this inside the nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpufleet_sim.state import State, present_gpus

Gpu = dict[str, Any]

DCGM_VERSION = "3.3.9"
DCGM_FAIL_FAULT = "dcgm-diag-fail"
DCGM_FAIL_GPU = 2
FAULTY_ELEMENTS = 1024
DEPLOYMENT = (
    "Denylist",
    "NVML Library",
    "CUDA Main Library",
    "Permissions and OS-related Blocks",
    "Persistence Mode",
    "Environmental Variables",
    "Page Retirement/Row Remap",
    "Graphics Processes",
    "Inforom",
)
# (category, test name, first level that runs it)
PLUGINS = (
    ("Integration", "PCIe", 2),
    ("Hardware", "GPU Memory", 2),
    ("Hardware", "Diagnostic", 3),
    ("Stress", "Targeted Stress", 3),
    ("Stress", "Targeted Power", 3),
    ("Stress", "Memory Bandwidth", 3),
    ("Hardware", "Memtest", 4),
    ("Hardware", "Pulse Test", 4),
)
# DCGM_FR_* codes, error categories and severities (dcgm_errors.h)
_PCIE, _MEMORY, _NVLINK, _CONFIG = 13, 10, 11, 3
_ISOLATE, _TRIAGE, _RESET, _MONITOR = 2, 4, 6, 1


@dataclass
class Finding:
    """One message of a test on one GPU."""

    status: str  # "Fail" or "Warn"
    code: int
    text: str
    category: int
    severity: int


@dataclass
class TestResult:
    category: str
    name: str
    gpus: list[int]  # the GPU ids (nvidia-smi indices) it ran on
    findings: dict[int, list[Finding]] = field(default_factory=dict)


def _find(result: TestResult, gpu: int, finding: Finding) -> None:
    result.findings.setdefault(gpu, []).append(finding)


def _software(state: State, gpus: list[Gpu], name: str, result: TestResult) -> None:
    if name == "Page Retirement/Row Remap":
        for index, gpu in enumerate(gpus):
            rows = gpu.get("remapped_rows") or {}
            if rows.get("failure"):
                text = f"GPU {index} had uncorrectable memory errors and row remapping failed."
                _find(result, index, Finding("Fail", 80, text, _MEMORY, _ISOLATE))
            elif rows.get("pending"):
                text = f"GPU {index} had memory errors and row remappings are pending"
                _find(result, index, Finding("Fail", 85, text, _MEMORY, _RESET))
    elif name == "Permissions and OS-related Blocks" and len(gpus) < len(state["gpus"]):
        text = "The number of devices NVML returns is different than the number of devices in /dev."
        for index in range(len(gpus)):
            _find(result, index, Finding("Warn", 20, text, _CONFIG, _TRIAGE))


def _pcie(gpus: list[Gpu], result: TestResult) -> None:
    for index, gpu in enumerate(gpus):
        pcie = gpu["pcie"]
        width, width_max = int(pcie.get("width_current", pcie["width"])), int(pcie["width"])
        gen_max = min(int(pcie["gen"]), int(pcie.get("host_gen", pcie["gen"])))
        gen = min(gen_max, int(pcie.get("gen_limit", gen_max)))
        if gen < gen_max:
            text = (
                f"GPU {index} is running at PCI link generation {gen}, which is below the minimum allowed "
                f"link generation of {gen_max} (parameter 'min_pci_generation')"
            )
            _find(result, index, Finding("Fail", 45, text, _PCIE, _TRIAGE))
        if width < width_max:
            text = (
                f"GPU {index} is running at PCI link width {width}X, which is below the minimum allowed "
                f"link generation of {width_max} (parameter 'min_pci_width')"
            )
            _find(result, index, Finding("Fail", 46, text, _PCIE, _TRIAGE))
        for link in sorted(int(n) for n in (gpu.get("nvlink") or {}).get("inactive", [])):
            text = f"GPU {index}'s NvLink link {link} is currently down"
            _find(result, index, Finding("Fail", 14, text, _NVLINK, _TRIAGE))


def _memory(state: State, gpus: list[Gpu], result: TestResult) -> None:
    for index, gpu in enumerate(gpus):
        dbe = int((gpu.get("ecc") or {}).get("volatile_uncorrected", 0))
        if dbe > 0:
            text = f"Detected {dbe} volatile double-bit ECC error(s) in GPU {index}."
            _find(result, index, Finding("Fail", 4, text, _MEMORY, _RESET))
    if DCGM_FAIL_FAULT in state.get("faults", []) and gpus:
        index = min(DCGM_FAIL_GPU, len(gpus) - 1)
        text = f"Found {FAULTY_ELEMENTS} faulty memory elements on GPU {index}"
        _find(result, index, Finding("Fail", 52, text, _MEMORY, _ISOLATE))


def run(state: State, level: int) -> list[TestResult]:
    """The tests of ``level`` (1-4) on the node's present GPUs, with what each finds."""
    gpus = present_gpus(state)
    ids = list(range(len(gpus)))
    results = []
    for name in DEPLOYMENT:
        result = TestResult("Deployment", name, ids)
        _software(state, gpus, name, result)
        results.append(result)
    for category, name, first in PLUGINS:
        if level < first:
            continue
        result = TestResult(category, name, ids)
        if name == "PCIe":
            _pcie(gpus, result)
        elif name in ("GPU Memory", "Memtest"):
            _memory(state, gpus, result)
        results.append(result)
    return results
