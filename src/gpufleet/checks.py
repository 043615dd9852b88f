"""The controller's side of the results vocabulary: the facts verdicts and a host's status.

``check``, ``change``, ``hint`` and HARMFUL_REASONS are the collection's own
(plugins/module_utils/core/results.py, loaded from this checkout). A condition a module judges
(``gpu_power.enforced_limit_w[<uuid>]``, ``rdma_link.link_state[<ibdev>]``,
``thermal.clocks_event_reasons[<uuid>]``) is never judged again here: ``gpufleet facts`` reports the
checks gpu_facts and rdma_facts return (tests/unit/test_check_producers.py: one producer per name).

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


def _ecc_check(gpu: dict[str, Any]) -> Check:
    uuid = gpu.get("uuid")
    ecc = (gpu.get("ecc") or {}).get("volatile_uncorrected")
    return check(
        f"gpu.ecc.volatile_uncorrected[{uuid}]",
        ecc == 0,
        ecc,
        0,
        "errors",
        "no uncorrected ECC errors" if ecc == 0 else f"uncorrected ECC errors: {ecc}",
    )


def facts_checks(facts: dict[str, Any], expected_gpus: int | None) -> list[Check]:
    """What ``gpufleet facts`` judges on the controller: that the facts came, the GPU count the
    inventory expects, each GPU's volatile ECC count and the topology. The GPUs' power, persistence
    and clock event reasons and the links' state are the modules' own checks (gpu_facts and
    rdma_facts with ``judge``), judged on the node by the roles' and the gate's judges."""
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
    checks.extend(_ecc_check(gpu) for gpu in gpus)
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
