"""gpufleet.prom's series of the NVSwitch fabric's health (issue 38 item 2): node_health.fact's fabric
state per GPU, its SXids per switch, and the watch's NVLink errors a minute per GPU."""

from __future__ import annotations

import copy

from gpufleet import prom
from tests.unit.test_prom import WATCH, L, check_metrics, series, watch_report


def test_fabric_sxid_and_nvlink_error_series() -> None:
    watch = copy.deepcopy(WATCH)
    watch["health"] = {
        "gpu_count": 3,
        "gpus": [
            {
                "uuid": "GPU-a",
                "index": 0,
                "fabric_state": "Completed",
                "fabric_status": "Success",
                "nvlink_errors_per_minute": {"crc": 84000.0, "replay": 0.0, "recovery": 0.0},
            },
            {"uuid": "GPU-b", "index": 1, "fabric_state": "In Progress", "fabric_status": None},
            # on no NVSwitch fabric, its NVLink errors not read: no series
            {"uuid": "GPU-c", "index": 2, "fabric_state": None, "nvlink_errors_per_minute": None},
        ],
        "xids": [],
        "sxids": [
            {
                "pci_bus_id": "0000:05:00.0",
                "device": "nvidia-nvswitch0",
                "sxid": 20034,
                "events": 3,
                "severity": "fatal",
            },
            {
                "pci_bus_id": "0000:07:00.0",
                "device": "nvidia-nvswitch2",
                "sxid": 20034,
                "events": 1,
                "severity": None,
            },
        ],
    }
    text = prom.render(watch_report(watch))
    check_metrics(text)
    assert series(text, "gpufleet_gpu_fabric_unhealthy", host="node01", command="watch") == {
        L(gpu="0", uuid="GPU-a", state="Completed", status="Success"): 0.0,
        L(gpu="1", uuid="GPU-b", state="In Progress", status="N/A"): 1.0,
    }
    assert series(text, "gpufleet_gpu_nvlink_errors_per_minute", host="node01", command="watch") == {
        L(gpu="0", uuid="GPU-a", kind="crc"): 84000.0,
        L(gpu="0", uuid="GPU-a", kind="recovery"): 0.0,
        L(gpu="0", uuid="GPU-a", kind="replay"): 0.0,
    }
    assert series(text, "gpufleet_nvswitch_sxid_events", host="node01", command="watch") == {
        L(pci_bus_id="0000:05:00.0", device="nvidia-nvswitch0", sxid="20034", sxid_severity="fatal"): 3.0,
        L(pci_bus_id="0000:07:00.0", device="nvidia-nvswitch2", sxid="20034", sxid_severity="unknown"): 1.0,
    }
