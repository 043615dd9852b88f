"""Fake `kubectl cordon|uncordon|drain <node> [flags]`.

Records every call (argv and time) in the node's state under ``scheduler_calls`` and keeps
``k8s_unschedulable``. Prints what kubectl prints: ``node/<name> cordoned``, ``node/<name>
uncordoned``, and for drain ``node/<name> cordoned`` (or ``already cordoned``) then
``node/<name> drained``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from gpufleet_sim.state import locked


def main(argv: list[str], node_dir: Path) -> int:
    with locked(node_dir) as state:
        state.setdefault("scheduler_calls", []).append({"tool": "kubectl", "argv": argv, "time": time.time()})
        words = [a for a in argv if not a.startswith("-")]
        if len(words) < 2 or words[0] not in ("cordon", "uncordon", "drain"):
            print(f'error: unknown command "{" ".join(words[:1])}" for "kubectl"', file=sys.stderr)
            return 1
        verb, node = words[0], words[1]
        was = bool(state.get("k8s_unschedulable"))
        if verb == "uncordon":
            state["k8s_unschedulable"] = False
            print(f"node/{node} {'uncordoned' if was else 'already uncordoned'}")
            return 0
        state["k8s_unschedulable"] = True
        print(f"node/{node} {'already cordoned' if was else 'cordoned'}")
        if verb == "drain":
            if "--ignore-daemonsets" not in argv:
                print(
                    f'error: unable to drain node "{node}" due to error: cannot delete DaemonSet-managed '
                    "Pods (use --ignore-daemonsets to ignore)",
                    file=sys.stderr,
                )
                return 1
            print(f"node/{node} drained")
        return 0
