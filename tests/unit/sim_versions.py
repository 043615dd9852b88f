"""The versions a default simulated node reports (node_versions.read of its nvidia-smi and sysfs): what
test_node_versions expects to read, a node's versions in test_drift_versions' drift reports, and a peer's
in test_fleet_versions."""

from __future__ import annotations

from typing import Any


def versions(**change: Any) -> dict[str, Any]:
    """A default simulated node's versions, with ``change`` over them."""
    base = {
        "gpu_product": ["NVIDIA B300 SXM6 AC"],
        "gpu_count": 16,
        "driver": "580.95.05",
        "cuda": "13.0",
        "vbios": ["97.10.4A.00.02"],
        "nic_firmware": ["40.44.1036"],
    }
    return {**base, **change}
