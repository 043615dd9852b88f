"""What the simulated leaf knows of NVUE's object model beyond the values it holds: which branches
exist, which values NVUE fills in by default, what NVUE adds to a PATCH by itself, and which changes
make an apply ask "are you sure".

Sources (NVIDIA's Cumulus Linux 5.12 user guide, "NVUE API" page, unless said otherwise):

- [OBJECTS] "Supported Objects": the high-level objects acl, bridge, evpn, interface, mlag, nve,
  platform, qos, router, service, system, vrf. A URL below any other first segment is a path NVUE's
  OpenAPI schema does not have.
- [FILLED] "View a Configuration": ``GET /nvue_v1/?rev=applied&filled=false`` shows the configuration
  without the values NVUE fills in; its example starts with the empty ``"acl": {}``.
- [PATCH] 5.10+: a PATCH answers "only the resulting configuration change", which "typically equals the
  request payload" plus what NVUE patches in by itself: ``{"interface": {"swp1": {}}}`` answers
  ``{"interface": {"swp1": {"type": "swp"}}}``. ``null`` unsets a key ("Unset a Configuration Change").
- [AYS] "Configuration Apply Fails with Warnings": an apply without ``"auto-prompt": {"ays": "ays_yes"}``
  ends in ``ays_fail`` only "in some cases, such as the first push with NVUE or if you change a file
  manually instead of using NVUE", with the issue ``{"code": "client_timeout", "data": {}, "message":
  "Timeout while waiting for client response", "severity": "error"}`` and progress "Aborted apply after
  warnings". NVOS's manual shows the other kind of prompt: "management interface config is changed. If
  you are connected with it, your connection may be temporary interrupted. Are you sure?".

What the sim treats as disruptive (an apply without ays_yes ends in ays_fail), by choice, from [AYS]:
files the state says were edited by hand (``files-changed-outside-nvue``), a change to the management
path (``interface/eth0``, ``vrf/mgmt``, ``system/api``: the connection the apply came in on), and a
port breakout (``interface/<swp>/link/breakout``: switchd restarts, every port flaps). Any other change
(qos, an interface's link, system hostname, service, router...) applies without asking.

Not modelled: the first-push prompt; the rest of the schema below a branch (values under acl, bridge,
evpn, mlag, nve, platform, router, service and vrf are kept as sent, not validated); defaults outside
qos, interface link and system; ``?rev=pending``; ``?diff=``; ``?view=``.
"""

from __future__ import annotations

import copy
from typing import Any

Tree = dict[str, Any]

# [OBJECTS]
BRANCHES = (
    "acl",
    "bridge",
    "evpn",
    "interface",
    "mlag",
    "nve",
    "platform",
    "qos",
    "router",
    "service",
    "system",
    "vrf",
)
# System values NVUE fills in: the guide's "timezone": "Etc/UTC" example, and auto-save on by default
# since 5.9 (NVUE reference, "nv config apply": "auto save is on by default").
SYSTEM_DEFAULTS: Tree = {"timezone": "Etc/UTC", "config": {"auto-save": {"enable": "on"}}}
# [AYS] the issue of an apply that needed an answer and got none.
AYS_ISSUE: Tree = {
    "0": {
        "code": "client_timeout",
        "data": {},
        "message": "Timeout while waiting for client response",
        "severity": "error",
    }
}
AYS_PROGRESS = "Aborted apply after warnings"
# Management paths: changing them can cut the session the apply came in on (NVOS's prompt).
_MANAGEMENT = (("interface", "eth0"), ("vrf", "mgmt"), ("system", "api"))


def empty_branches() -> Tree:
    """Every top-level object, empty: [FILLED]'s ``"acl": {}``."""
    return {branch: {} for branch in BRANCHES}


def unfilled(tree: Any, defaults: Any, top: bool = True) -> Any:
    """``tree`` without the values equal to ``defaults`` ([FILLED]); the top-level branches stay."""
    if not isinstance(tree, dict) or not isinstance(defaults, dict):
        return tree
    out: Tree = {}
    for key, value in tree.items():
        if key not in defaults:
            out[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(defaults[key], dict):
            rest = unfilled(value, defaults[key], top=False)
            if rest or top or (not value and defaults[key]):
                out[key] = rest
        elif value != defaults[key]:
            out[key] = copy.deepcopy(value)
    return out


def unset(tree: Tree, patch: Tree) -> Tree:
    """``patch`` merged into ``tree`` in place, a ``null`` value removing its key ([PATCH])."""
    for key, value in patch.items():
        if value is None:
            tree.pop(key, None)
        elif isinstance(value, dict) and isinstance(tree.get(key), dict):
            unset(tree[key], value)
        else:
            tree[key] = _without_nulls(value)
    return tree


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return copy.deepcopy(value)


def autofilled(rooted: Tree) -> Tree:
    """``rooted`` (a PATCH body wrapped to the root) with what NVUE adds by itself: ``type: swp`` on a
    front-panel port it names ([PATCH])."""
    out = copy.deepcopy(rooted)
    ports = out.get("interface")
    if isinstance(ports, dict):
        for name, port in ports.items():
            if name.startswith("swp") and isinstance(port, dict) and "type" not in port:
                port["type"] = "swp"
    return out


def disruptive(before: Tree, after: Tree, state: Tree) -> list[str]:
    """Why applying ``after`` over ``before`` asks "are you sure" (empty: it does not): see the docstring."""
    reasons = [f"{name} was changed outside NVUE" for name in state.get("files-changed-outside-nvue") or []]
    for path in _MANAGEMENT:
        if _at(before, path) != _at(after, path):
            reasons.append(f"{'/'.join(path)} changes: the management connection may be interrupted")
    for port in sorted(set(before.get("interface", {})) | set(after.get("interface", {}))):
        breakout = ("interface", str(port), "link", "breakout")
        if _at(before, breakout) != _at(after, breakout):
            reasons.append(f"{port} breakout changes: switchd restarts")
    return reasons


def _at(tree: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(part)
    return tree
