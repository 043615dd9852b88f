"""The controller's side of the results vocabulary: the facts verdicts and a host's status.

``check``, ``change``, ``hint`` and HARMFUL_REASONS are the collection's own
(plugins/module_utils/core/results.py, loaded from this checkout), so a check judged here on the
controller and one judged by a module on the node are built by the same code, under the same name:
``gpufleet facts`` names a condition as the role or the gate that owns it does
(``gpu_power.enforced_limit_w[<uuid>]``, ``rdma_link.link_state[<ibdev>]``,
``thermal.clocks_event_reasons[<uuid>]``).

``host_status`` is the one place a host's results become its status, for every command.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

# The checkout this gpufleet runs from (runner.REPO_DIR; not imported, so report.py stays light).
_REPO_DIR = Path(__file__).resolve().parents[2]

Check = dict[str, Any]

_RESULTS_NAME = "ansible_collections.gpufleet.node.plugins.module_utils.core.results"


def _results() -> ModuleType:
    """plugins/module_utils/core/results.py (stdlib only), loaded once; shared with the modules'
    own import."""
    loaded = sys.modules.get(_RESULTS_NAME)
    if loaded is not None:
        return loaded
    path = _REPO_DIR / "plugins" / "module_utils" / "core" / "results.py"
    spec = importlib.util.spec_from_file_location("gpufleet._module_utils_results", path)
    if spec is None or spec.loader is None:  # pragma: no cover - the checkout is incomplete
        raise ImportError(f"cannot load gpufleet's results vocabulary from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_vocabulary = _results()
check = cast(Callable[[str, bool, Any, Any, str, str], Check], _vocabulary.check)
change = cast(Callable[[str, Any, Any], dict[str, Any]], _vocabulary.change)
hint = cast(Callable[[str], str], _vocabulary.hint)
HARMFUL_REASONS = cast(tuple[str, ...], _vocabulary.HARMFUL_REASONS)
failed_names = cast(Callable[[Iterable[Check]], list[str]], _vocabulary.failed_names)
task_message = cast(Callable[[dict[str, Any]], str], _vocabulary.task_message)

# What a host's results can make it (report.STATUSES is this tuple).
STATUSES = ("ok", "changed", "drifted", "blocked", "failed", "unreachable", "interrupted")
GOOD_STATUSES = ("ok", "changed")


def host_status(
    *,
    unreachable: bool = False,
    failed: bool = False,
    checks: Iterable[Check] = (),
    changes: Iterable[dict[str, Any]] = (),
    changed: bool = False,
    check_mode: bool = False,
    failed_as: str = "failed",
) -> str:
    """A host's status from its results, for every command.

    unreachable wins; then a failed task or a failed check makes it ``failed_as`` (``blocked`` for
    the gate: the node stays out of service); then changes make it ``drifted`` in check mode (nothing
    was changed: provision --check, drift) or ``changed``; else ``ok``.
    """
    if unreachable:
        return "unreachable"
    if failed or any(not c["ok"] for c in checks):
        return failed_as
    if any(True for _ in changes) or changed:
        return "drifted" if check_mode else "changed"
    return "ok"


def is_good(status: str) -> bool:
    """Whether a status means the host is fine (ok, or changed into the wanted state)."""
    return status in GOOD_STATUSES


def one_per_condition(checks: Iterable[Check]) -> list[Check]:
    """One check per name, in first-seen order. A run may judge a condition twice (the gate reads
    thermal.* at idle and again under load): the last failed one wins, since a failure is what
    blocked the host; when none failed, the last one, the latest reading."""
    chosen: dict[str, Check] = {}
    for c in checks:
        held = chosen.get(c["name"])
        if held is None or not c["ok"] or held["ok"]:
            chosen[c["name"]] = c
    return list(chosen.values())


def _gpu_checks(gpu: dict[str, Any]) -> list[Check]:
    uuid = gpu.get("uuid")
    power = gpu.get("power") or {}
    enforced, requested = power.get("enforced_limit_w"), power.get("requested_limit_w")
    persistence = gpu.get("persistence_mode")
    checks = [
        check(
            f"gpu_power.persistence_mode[{uuid}]",
            persistence is True,
            persistence,
            True,
            "",
            f"{uuid} is in persistence mode" if persistence else f"{uuid} is not in persistence mode",
        )
    ]
    capped = enforced is None or requested is None or enforced < requested
    checks.append(
        check(
            f"gpu_power.enforced_limit_w[{uuid}]",
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
    reasons = gpu.get("clocks_event_reasons")
    active = [r for r in reasons or [] if r in HARMFUL_REASONS]
    if reasons is None:
        message = f"GPU {uuid} clock event reasons not reported (fail closed)"
    elif active:
        message = f"GPU {uuid} clocks held back by {', '.join(active)}"
    else:
        message = f"GPU {uuid}: no forbidden clock event reason active"
    checks.append(
        check(
            f"thermal.clocks_event_reasons[{uuid}]",
            reasons is not None and not active,
            None if reasons is None else active,
            [],
            "",
            message,
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
                f"rdma_link.link_state[{ibdev}]",
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
