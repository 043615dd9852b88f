"""Health checks computed from the facts a node reported (the `gpufleet facts` verdicts)."""

from __future__ import annotations

from typing import Any

Check = dict[str, Any]

# Active clock event reasons that cost throughput; idle and app-clock reasons are harmless.
HARMFUL_REASONS = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)


def check(name: str, ok: bool, value: Any, limit: Any, unit: str, message: str) -> Check:
    return {"name": name, "ok": ok, "value": value, "limit": limit, "unit": unit, "message": message}


def _gpu_checks(gpu: dict[str, Any]) -> list[Check]:
    uuid = gpu.get("uuid")
    power = gpu.get("power") or {}
    enforced, requested = power.get("enforced_limit_w"), power.get("requested_limit_w")
    checks = [
        check(
            f"gpu.persistence_mode[{uuid}]",
            gpu.get("persistence_mode") is True,
            gpu.get("persistence_mode"),
            True,
            "",
            "persistence mode is on" if gpu.get("persistence_mode") else "persistence mode is off",
        )
    ]
    capped = enforced is None or requested is None or enforced < requested
    checks.append(
        check(
            f"gpu.power.enforced_limit_w[{uuid}]",
            not capped,
            enforced,
            requested,
            "W",
            (
                f"enforced power limit {enforced} W is below the requested {requested} W"
                " (a rack/PDU power budget may be capping it)"
                if capped
                else f"enforced power limit {enforced} W matches the request"
            ),
        )
    )
    active = [r for r in gpu.get("clocks_event_reasons") or [] if r in HARMFUL_REASONS]
    checks.append(
        check(
            f"gpu.clocks_event_reasons[{uuid}]",
            not active,
            active,
            [],
            "",
            f"clocks held back by {', '.join(active)}" if active else "no throttling reason active",
        )
    )
    ecc = (gpu.get("ecc") or {}).get("volatile_uncorrected")
    checks.append(
        check(
            f"gpu.ecc.volatile_uncorrected[{uuid}]",
            ecc == 0,
            ecc,
            0,
            "errors",
            "no uncorrected ECC errors" if ecc == 0 else f"uncorrected ECC errors: {ecc}",
        )
    )
    return checks


def _nic_checks(rdma: dict[str, Any]) -> list[Check]:
    checks = []
    for ibdev, dev in sorted((rdma.get("devices") or {}).items()):
        state = dev.get("state")
        up = isinstance(state, str) and "ACTIVE" in state.upper()
        checks.append(
            check(
                f"rdma.link_state[{ibdev}]",
                up,
                state,
                "ACTIVE",
                "",
                f"{ibdev} ({dev.get('netdev')}) link is {state}",
            )
        )
    return checks


def facts_checks(facts: dict[str, Any], expected_gpus: int | None) -> list[Check]:
    gpus = facts.get("gpufleet_gpus")
    if gpus is None:
        return [check("gpu.facts", False, None, None, "", "no GPU facts were gathered")]
    checks: list[Check] = []
    if expected_gpus is not None:
        checks.append(
            check(
                "gpu.count",
                len(gpus) == expected_gpus,
                len(gpus),
                expected_gpus,
                "GPUs",
                f"{len(gpus)} of {expected_gpus} GPUs visible",
            )
        )
    for gpu in gpus:
        checks.extend(_gpu_checks(gpu))
    checks.extend(_nic_checks(facts.get("gpufleet_rdma") or {}))
    topology = facts.get("gpufleet_gpu_topology")
    checks.append(
        check(
            "gpu.topology",
            topology is not None,
            None if topology is None else len(topology.get("nvlink_domains") or []),
            None,
            "NVLink domains",
            "topology read" if topology is not None else "nvidia-smi topo -m unavailable or inconsistent",
        )
    )
    return checks
