"""Fake `kubectl cordon|uncordon|drain <node> [flags]` and `kubectl annotate node <node> [--overwrite] ...`.

Records every call (argv and time) in the node's state under ``scheduler_calls`` and keeps
``k8s_unschedulable`` and the node object's annotations (``k8s_annotations``, key -> value). Prints what
kubectl prints: ``node/<name> cordoned``, ``node/<name> uncordoned``, for drain ``node/<name> cordoned``
(or ``already cordoned``) then ``node/<name> drained``, and for annotate ``node/<name> annotated``.

annotate parses its words as kubectl's annotate.go does (cmdutil.GetResourcesAndPairs, ParsePairs):
the resource (``node <name>``, ``nodes <name>`` or ``node/<name>``) first, then ``key=value`` (set)
and ``key-`` (remove; a key that is not there is no error). Setting a key the node already has without
``--overwrite`` is refused, naming the key and its value, and nothing changes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from gpufleet_sim.state import locked

NODE_TYPES = ("node", "nodes", "no")


def _is_pair(word: str) -> bool:
    """A `key=value` or `key-` word (GetResourcesAndPairs' nonResource)."""
    return ("=" in word and not word.startswith("=")) or (word.endswith("-") and word != "-")


def _annotate(argv: list[str], state: dict[str, Any]) -> tuple[str, str]:
    """kubectl annotate on the node's state: (stdout, stderr); stderr means exit status 1."""
    overwrite = False
    words = []
    for arg in argv[1:]:
        if arg in ("--overwrite", "--overwrite=true"):
            overwrite = True
        elif arg == "--overwrite=false":
            overwrite = False
        elif not arg.startswith("-"):  # other flags (--dry-run, -n ...) change nothing here
            words.append(arg)
    resources: list[str] = []
    pairs: list[str] = []
    for word in words:
        if _is_pair(word):
            pairs.append(word)
        elif pairs:
            return "", f"error: all resources must be specified before annotation changes: {word}\n"
        else:
            resources.append(word)
    new: dict[str, str] = {}
    remove: list[str] = []
    invalid = []
    for pair in pairs:
        if "=" in pair and not pair.startswith("="):
            key, value = pair.split("=", 1)
            new[key] = value
        elif pair.endswith("-") and pair != "-":
            remove.append(pair[:-1])
        else:
            invalid.append(pair)
    if invalid:
        return "", f"error: invalid annotation format: {', '.join(invalid)}\n"
    if not resources:
        return (
            "",
            "error: one or more resources must be specified as <resource> <name> or <resource>/<name>\n",
        )
    if not new and not remove:
        return "", "error: at least one annotation update is required\n"
    both = [key for key in remove if key in new]
    if both:
        return "", (
            "error: can not both modify and remove the following annotation(s) in the same command: "
            f"{', '.join(both)}\n"
        )
    kind, _, node = resources[0].partition("/")
    if not node:
        if len(resources) < 2:
            return "", "error: resource(s) were provided, but no name was specified\n"
        node = resources[1]
    if kind not in NODE_TYPES:
        return "", f'error: the server doesn\'t have a resource type "{kind}"\n'
    annotations: dict[str, str] = state.setdefault("k8s_annotations", {})
    if not overwrite:
        found = [f"'{key}' already has a value ({annotations[key]})" for key in new if key in annotations]
        if found:
            return "", (
                "error: --overwrite is false but found the following declared annotation(s): "
                f"{'; '.join(found)}\n"
            )
    annotations.update(new)
    for key in remove:
        annotations.pop(key, None)
    return f"node/{node} annotated\n", ""


def main(argv: list[str], node_dir: Path) -> int:
    with locked(node_dir) as state:
        state.setdefault("scheduler_calls", []).append({"tool": "kubectl", "argv": argv, "time": time.time()})
        words = [a for a in argv if not a.startswith("-")]
        if words[:1] == ["annotate"]:
            out, err = _annotate(argv, state)
            print(out, end="")
            print(err, end="", file=sys.stderr)
            return 1 if err else 0
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
