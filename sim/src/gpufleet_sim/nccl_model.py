"""What an NCCL all-reduce over a simulated node's GPUs achieves: the bus bandwidth of its ring.

A ring all-reduce over n ranks moves 2(n-1)/n of the buffer over every link of the ring, so its bus
bandwidth (nccl-tests' busbw = algbw * 2(n-1)/n) is the bandwidth of the ring's slowest hop:

- NVLink, within one baseboard (one ``nvlink_domain``): the GPU with the fewest active links bounds it,
  active links x the profile's per-link speed (h100-8: 18 x 26.562 = 478 GB/s, the real 8 x H200
  capture's 477 at 8 GiB; an inactive link (nvlink-down) takes 1/18 off).
- RoCE, between baseboards (b300-16: two 8-GPU boards): each board's traffic to the other leaves
  through that board's own NICs, so the ring's crossing is bounded by the board with the least egress:
  the sum over its NICs of line rate x what the port's path lets through (:func:`nic_share`, judged
  with sim/roce_traffic's ``path_of``), each NIC also capped by the PCIe link of the GPUs on its PCIe
  switch (GPUDirect RDMA goes GPU -> switch -> NIC; a GPU stuck at Gen1 x8 feeds 2 GB/s), times
  ROCE_EFFICIENCY. b300-16: 4 x 400 Gb/s = 200 GB/s per board -> 170 GB/s healthy.
- ``nccl-slow`` (a fault with nothing else visibly wrong): a quarter of all that, latency included.

Small buffers are latency-bound: a row's time is ``latency + size / algbw``, so the average over a
sweep from a few bytes (``# Avg bus bandwidth``) is far below the large-size figure, as on real nodes.

Stdlib only: the fake all_reduce_perf runs this inside the nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet_sim import roce_traffic
from gpufleet_sim.state import State

Gpu = dict[str, Any]

NVLINK_EFFICIENCY = 1.0
ROCE_EFFICIENCY = 0.85
# Per-row latency (us): a ring within one NVSwitch domain, and one that crosses the RoCE fabric.
NVLINK_LATENCY_US = 20.0
ROCE_LATENCY_US = 45.0
# One GPU: nccl-tests copies the buffer on the device (busbw 0.00); HBM copy bandwidth in GB/s.
SINGLE_GPU_COPY_GBS = 1500.0
# What a port's path lets through (roce_traffic's conditions): drops and go-back-N retransmits when
# RoCE is not lossless; no congestion control (ECN off at the switch, no CNP sent or acted on) leaves
# the senders paused as much as roce_traffic's ECN-off pause share (35 %); frames above the switch's
# MTU are dropped and the queue pairs time out.
LOSSY_SHARE = 0.3
NO_CONGESTION_CONTROL_SHARE = 1.0 - roce_traffic._ECN_OFF_PAUSE["rx"][1]
MTU_DROP_SHARE = 0.05
NCCL_SLOW = "nccl-slow"
NCCL_SLOW_SHARE = 0.25
# PCIe bandwidth per lane and direction after encoding (GB/s), by generation.
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.877}


@dataclass(frozen=True)
class Ring:
    """The all-reduce ring over some GPUs: its large-buffer bus bandwidth and its per-call latency."""

    ranks: int
    busbw_gbps: float
    latency_us: float
    bound: str  # "nvlink", "roce" or "copy" (one GPU)

    def algbw_gbps(self) -> float:
        if self.ranks < 2:
            return SINGLE_GPU_COPY_GBS
        return self.busbw_gbps * self.ranks / (2 * (self.ranks - 1))

    def time_us(self, size_bytes: int) -> float:
        """One all-reduce of ``size_bytes``: latency plus the bytes at the ring's algorithm bandwidth."""
        return self.latency_us + size_bytes / (self.algbw_gbps() * 1e3)


def pcie_gbs(gpu: Gpu) -> float:
    """The GPU's PCIe bandwidth under load: the generation it trains to and its current width."""
    pcie = gpu["pcie"]
    gen_max = int(pcie["gen"])
    gen = min(gen_max, int(pcie.get("host_gen", gen_max)), int(pcie.get("gen_limit", gen_max)))
    width = int(pcie.get("width_current", pcie["width"]))
    return PCIE_LANE_GBS.get(gen, PCIE_LANE_GBS[6]) * width


def nvlink_gbs(gpu: Gpu) -> float:
    inactive = {int(link) for link in (gpu.get("nvlink") or {}).get("inactive", [])}
    active = int(gpu["nvlink_count"]) - len(inactive)
    return max(active, 0) * float(gpu["nvlink_speed_gbps"])


def nic_share(path: roce_traffic.PortPath) -> float:
    """The share of its line rate a port's path lets the all-reduce use."""
    if not path.up:
        return 0.0
    if not path.mtu:
        return MTU_DROP_SHARE
    if not path.lossless:
        return LOSSY_SHARE
    if not (path.switch_ecn and path.host_np and path.host_rp):
        return NO_CONGESTION_CONTROL_SHARE
    return 1.0


def board_egress_gbs(node_dir: Path, state: State, gpus: list[Gpu], board: int) -> float:
    """GB/s one baseboard can send to the others: its NICs' usable rates, each capped by the PCIe of
    the ring's GPUs on that NIC's PCIe switch."""
    switches = {int(g["switch"]) for g in gpus if int(g["nvlink_domain"]) == board}
    total = 0.0
    for nic in state["nics"]:
        if int(nic["switch"]) not in switches:
            continue
        rate = float(nic["speed_gbps"]) / 8 * nic_share(roce_traffic.path_of(node_dir, nic))
        feeders = [pcie_gbs(g) for g in gpus if int(g["switch"]) == int(nic["switch"])]
        total += min([rate, *feeders])
    return total


def ring(node_dir: Path, state: State, gpus: list[Gpu]) -> Ring:
    """The ring NCCL builds over ``gpus`` (present GPUs of the node, in rank order)."""
    slow = NCCL_SLOW_SHARE if NCCL_SLOW in state.get("faults", []) else 1.0
    if len(gpus) < 2:
        return Ring(len(gpus), 0.0, NVLINK_LATENCY_US / slow, "copy")
    busbw = min(nvlink_gbs(g) for g in gpus) * NVLINK_EFFICIENCY
    bound, latency = "nvlink", NVLINK_LATENCY_US
    boards = sorted({int(g["nvlink_domain"]) for g in gpus})
    if len(boards) > 1:
        roce = min(board_egress_gbs(node_dir, state, gpus, b) for b in boards) * ROCE_EFFICIENCY
        latency = ROCE_LATENCY_US
        if roce < busbw:
            busbw, bound = roce, "roce"
    return Ring(len(gpus), busbw * slow, latency / slow, bound)
