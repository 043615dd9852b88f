"""An ansible-runner artifact directory written as `ansible-runner process` leaves it (one file per
event), for the tests of `gpufleet report --from-events`; and the drift playbook's play names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PLAYBOOK = "/runner/project/playbooks/drift.yml"
READ = "Read each leaf switch once (its side of every RoCE link)"
COMPARE = "Compare every role's desired state with the node"


def artifacts(
    where: Path,
    hosts: dict[str, Any],
    playbook: str = PLAYBOOK,
    stats: bool = True,
    artifact_data: dict[str, Any] | None = None,
) -> Path:
    """An ansible-runner artifact directory: one file per event, as `ansible-runner process` writes."""
    events: list[dict[str, Any]] = [{"event": "playbook_on_start", "event_data": {"playbook": playbook}}]
    for name, (play, res) in hosts.items():
        data = {"host": name, "task": "Read", "play": play, "playbook": playbook, "res": res}
        events.append({"event": "runner_on_ok", "event_data": data, "created": "2026-12-04T09:00:01.5"})
    if stats:
        events.append(
            {
                "event": "playbook_on_stats",
                "event_data": {
                    "playbook": playbook,
                    "ok": dict.fromkeys(hosts, 1),
                    "artifact_data": artifact_data or {},
                },
            }
        )
    found = where / "job_events"
    found.mkdir(parents=True)
    for counter, event in enumerate(events, start=1):
        event["counter"] = counter
        (found / f"{counter}-uuid.json").write_text(json.dumps(event), encoding="utf-8")
    return where
