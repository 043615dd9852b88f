"""A simulated Cumulus Linux leaf switch's NVUE state: one JSON file per switch, and its views.

The file holds what the switch would keep: its NVUE account (salted hash only), its LLDP identity,
the applied configuration tree (the part of NVUE's object model gpufleet uses), optional operational
overrides (hardware that disagrees with the applied configuration, for fault injection), and its
configuration revisions. Tests and fault injection change it with ``locked(path)``; the server
re-reads it when its modification time changes.

Where the shapes come from (NVUE has no public JSON capture of ``GET /nvue_v1/qos/roce`` alone):

- [TREE] the one real full-tree response that is public: ``curl -u cumulus:cumulus
  'https://127.0.0.1:8765/nvue_v1/?rev=applied'`` on Cumulus VX 5.5.1 in NVIDIA's "Cumulus Linux
  Automation Workshop" README (gitlab nvidia-networking/systems-engineering/nvue, branch
  cumulus-linux-55-automation-workshop, Apache-2.0; tests/fixtures/real/INDEX.md section 9).
  Keys are kebab-case; switches are "on"/"off" or "enable"/"disable" strings; numbers are JSON
  numbers; collections are objects keyed by id (``"pcp": {"0": {"switch-priority": 0}, ...}``),
  and member sets are objects of empty objects (``"switch-priority": {"0": {}, ...}``).
- [ROCE] NVIDIA's Cumulus Linux 5.12 user guide, "RDMA over Converged Ethernet - RoCE": the RoCE
  lossless defaults (DSCP 26 -> switch priority 3 -> traffic class 3, PFC on priority 3; DSCP 48 ->
  priority 6 -> traffic class 6 for CNPs, strict; ECN on traffic classes 0 and 3) and the rows of
  ``nv show qos roce`` and ``nv show interface <swp> qos roce status``.
- [QOS] the same guide, "Quality of Service": ``nv set qos mapping default-global dscp <n>
  switch-priority <p>``, ``trust l2|l3|both|port``, ``nv set qos pfc default-global switch-priority
  <p> | tx enable | rx enable | cable-length``, and the default DSCP -> switch priority table.
- [API] the guide's "NVUE API" page and NVIDIA's "Use Cases and Recommendations" guide: ``POST
  /nvue_v1/revision`` answers ``{"changeset/<user>/<date>_<time>_<XXXX>": {"state": "pending",
  "transition": {"issue": {}, "progress": ""}}}``; ``PATCH .../revision/<id>`` with ``{"state":
  "apply", "auto-prompt": {"ays": "ays_yes"}}`` answers ``{"state": "apply", "transition": ...}``;
  ``GET .../revision/<id>`` answers ``{"state": "applied", ...}``; since 5.10 a PATCH answers the
  change it made (the request payload plus what NVUE added: nvue_model [PATCH]).

What is assumed (written again next to each shape below):

- The sim keeps the RoCE profile's effects explicitly in the applied tree (what ``?rev=applied``
  with the profile filled would show); it does not expand ``qos roce enable`` into the profile
  itself, so a fault that turns PFC off on priority 3 is one key, and a fix is one PATCH.
- ``mapping.<profile>.dscp.<n>.switch-priority`` mirrors the real ``pcp.<n>.switch-priority`` [TREE].
- ``pfc.<profile>`` carries the rows ``nv show qos pfc default-global`` prints [QOS], with the
  ``[switch-priority]`` collection as an object of empty objects like [TREE]'s traffic pools.
- The operational-only nodes (``qos/roce`` summary rows, ``interface/<swp>/qos/roce/status``) use
  the row names of the guide's ``nv show`` tables nested as printed [ROCE]; thresholds are bytes
  (JSON numbers), not the CLI's "1.43 MB". The tables below those rows (PCP/DSCP->SP, SP->TC, pools)
  are not served.
- An invalid value under qos or an interface's link is refused at PATCH time with HTTP 400. Which
  apply asks "are you sure" (ays_fail without ``auto-prompt.ays: ays_yes``), which values are
  filled in (``filled=false`` leaves them out), what a PATCH answers, and what is not modelled:
  ``nvue_model``'s docstring.
- [SAVE] the guide's "Save a Configuration": ``PATCH /nvue_v1/revision/applied`` with ``{"state":
  "save", "auto-prompt": {"ays": "ays_yes"}}`` answers ``{"state": "save", "transition": ...}`` and
  writes the applied configuration to startup (``?rev=startup``); with ``system config auto-save
  enable on`` (the default since 5.9) every apply saves too.

Standard library only (Python 3.11): it runs beside the fleet's other simulated devices.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import secrets
import string
import time
from pathlib import Path
from typing import Any

from gpufleet_sim import nvue_model
from gpufleet_sim import state as sim_state

State = dict[str, Any]
Tree = dict[str, Any]

NVUE_API_VERSION = "nvue_v1"
VERSION = "Cumulus Linux 5.12.0"
MODEL = "SN5600"
USERNAME = "cumulus"
# Jumbo frames as Cumulus ships them: [TREE] shows link.mtu 9216 on eth0.
DEFAULT_MTU = 9216
# The NVUE schema's MTU range (Cumulus Linux accepts 552..9216).
MTU_RANGE = (552, 9216)
# The RoCE lossless profile's priorities and classes [ROCE].
ROCE_PRIORITY = 3
ROCE_TRAFFIC_CLASS = 3
CNP_PRIORITY = 6
CNP_TRAFFIC_CLASS = 6
ROCE_DSCP = 26
CNP_DSCP = 48
# ECN thresholds (bytes) and probability of [TREE]'s congestion-control traffic class.
ECN_MIN_THRESHOLD = 150000
ECN_MAX_THRESHOLD = 1500000
# Revisions kept in the file (oldest dropped first), as NVUE keeps a bounded history.
MAX_REVISIONS = 32
# Revision states NVUE reports [API]; "apply" is in progress, the rest are final.
FINAL_STATES = frozenset(("applied", "apply_fail", "ays_fail", "invalid"))


class PatchError(ValueError):
    """A PATCH NVUE would refuse (HTTP 400): the message says which key and why."""


class UnknownPath(KeyError):
    """A URL path NVUE's schema does not have (HTTP 404, as for any unknown URL)."""


# ---------------------------------------------------------------- the default tree


def _members(ids: list[int]) -> dict[str, dict[str, Any]]:
    return {str(i): {} for i in ids}


def default_qos() -> Tree:
    """The applied ``qos`` subtree of a leaf with the RoCE lossless profile in force.

    Shape: [TREE] (mapping/pcp, congestion-control, egress-queue-mapping, egress-scheduler,
    traffic-pool, roce). Values: [ROCE]'s lossless defaults. Assumed: dscp under mapping, pfc's
    profile keys, roce.mode (see the module docstring).
    """
    # [QOS]: with trust l3, DSCP 8p..8p+7 maps to switch priority p.
    dscp = {str(d): {"switch-priority": d // 8} for d in range(64)}
    roce_tcs = {0: 0, ROCE_PRIORITY: ROCE_TRAFFIC_CLASS, CNP_PRIORITY: CNP_TRAFFIC_CLASS}
    return {
        "roce": {"enable": "on", "mode": "lossless"},
        "mapping": {
            "default-global": {
                "pcp": {str(p): {"switch-priority": p} for p in range(8)},
                "dscp": dscp,
                "port-default-sp": 0,
                # [ROCE] "nv set qos mapping default-global trust both"; shown as "pcp,dscp".
                "trust": "both",
            }
        },
        "pfc": {
            "default-global": {
                "switch-priority": _members([ROCE_PRIORITY]),
                "rx": "enable",
                "tx": "enable",
                "cable-length": 100,
            }
        },
        "congestion-control": {
            "default-global": {
                "traffic-class": {
                    str(tc): {
                        "ecn": "enable",
                        "red": "disable",
                        "min-threshold": ECN_MIN_THRESHOLD,
                        "max-threshold": ECN_MAX_THRESHOLD,
                        "probability": 100,
                    }
                    for tc in (0, ROCE_TRAFFIC_CLASS)
                }
            }
        },
        "egress-queue-mapping": {
            "default-global": {
                "switch-priority": {str(p): {"traffic-class": roce_tcs.get(p, 0)} for p in range(8)}
            }
        },
        "egress-scheduler": {
            "default-global": {
                "traffic-class": {
                    "0": {"bw-percent": 50, "mode": "dwrr"},
                    str(ROCE_TRAFFIC_CLASS): {"bw-percent": 50, "mode": "dwrr"},
                    str(CNP_TRAFFIC_CLASS): {"mode": "strict"},
                }
            }
        },
        "traffic-pool": {
            "default-lossy": {
                "memory-percent": 50,
                "switch-priority": _members([p for p in range(8) if p != ROCE_PRIORITY]),
            },
            "roce-lossless": {"memory-percent": 50, "switch-priority": _members([ROCE_PRIORITY])},
        },
    }


def default_interface(mtu: int = DEFAULT_MTU) -> Tree:
    """One front-panel port: [TREE]'s eth0 ``link`` with ``type: swp`` ([API]: NVUE sets it)."""
    return {
        "link": {
            "auto-negotiate": "off",
            "duplex": "full",
            "fec": "auto",
            "mtu": mtu,
            "speed": "400G",
            "state": {"up": {}},
        },
        "type": "swp",
    }


def port_names(count: int) -> list[str]:
    return [f"swp{i}" for i in range(1, count + 1)]


def new_state(
    hostname: str,
    password_record: dict[str, str],
    ports: int = 32,
    chassis_id: str | None = None,
    mgmt_ip: str | None = None,
) -> State:
    """A healthy leaf: RoCE lossless, every port up at MTU 9216.

    ``password_record`` is ``gpufleet_sim.bmc.passwords.hashed(...)``: the file never holds the
    password. ``lldp`` is the identity the switch advertises (lldpd's chassis name and id, and each
    port's ifname id and description), kept here for the nodes' ``lldpctl`` to report.
    """
    names = port_names(ports)
    chassis = chassis_id or ":".join(["1c", "34", "da"] + [f"{secrets.randbelow(256):02x}" for _ in range(3)])
    return {
        "hostname": hostname,
        "api": {"username": USERNAME, **password_record},
        "lldp": {
            "system-name": hostname,
            "chassis-id": chassis,
            "mgmt-ip": mgmt_ip,
            "ports": {name: {"id": name, "descr": name} for name in names},
        },
        "applied": {
            **nvue_model.empty_branches(),
            "interface": {name: default_interface() for name in names},
            "qos": default_qos(),
            "system": {"hostname": hostname, **copy.deepcopy(nvue_model.SYSTEM_DEFAULTS)},
        },
        # Deep-merged over the applied tree in ?rev=operational (a fault where hardware differs).
        "operational-override": {},
        # Seconds between an apply request and the revision reading "applied".
        "apply-delay-s": 0.0,
        "revisions": {},
        "applied-revision": None,
        # [SAVE]: what survives a reboot (/etc/nvue.d/startup.yaml); None reads as the applied tree.
        "startup": None,
        # [AYS]'s "change a file manually": files named here make any apply ask (a fault sets them).
        "files-changed-outside-nvue": [],
    }


# ---------------------------------------------------------------- the file


# Read and written as a node's state is (sim/state.py): replaced whole, a lock file beside it.
load = sim_state.load_file
save = sim_state.save_file


def locked(path: Path) -> contextlib.AbstractContextManager[State]:
    """Read-modify-write of a switch's state file; the server and fault injection serialise here."""
    return sim_state.locked_file(path, path.with_name(path.name + ".lock"))


# ---------------------------------------------------------------- trees


def merge(base: Tree, patch: Tree) -> Tree:
    """``patch`` deep-merged into a copy of ``base`` (objects merge, anything else replaces)."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def walk(tree: Any, parts: list[str]) -> Any:
    """The node at ``parts`` below ``tree``; KeyError when there is none."""
    node = tree
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            raise KeyError("/".join(parts))
        node = node[part]
    return node


def header(state: State) -> Tree:
    # [TREE]: "header": {"model", "nvue-api-version", "rev-id", "version"}.
    return {"model": MODEL, "nvue-api-version": NVUE_API_VERSION, "rev-id": 1.0, "version": VERSION}


def _priorities(members: Any) -> list[int]:
    return sorted(int(k) for k in members) if isinstance(members, dict) else []


_TRUST_MODE = {"l2": "pcp", "l3": "dscp", "both": "pcp,dscp", "port": "port"}


def roce_summary(qos: Tree, per_port: bool) -> Tree:
    """The rows of ``nv show qos roce`` (global) or ``... interface <swp> qos roce status`` (port).

    Assumed shape (see the module docstring): the rows nested as the guide prints them [ROCE], the
    global view saying "enabled"/"disabled" and the port view "yes"/"no" as the guide shows.
    """
    pfc = qos.get("pfc", {}).get("default-global", {})
    cc = qos.get("congestion-control", {}).get("default-global", {}).get("traffic-class", {})
    ecn_tcs = sorted(int(tc) for tc, v in cc.items() if isinstance(v, dict) and v.get("ecn") == "enable")
    roce_cc = cc.get(str(ROCE_TRAFFIC_CLASS), {}) if isinstance(cc, dict) else {}
    trust = qos.get("mapping", {}).get("default-global", {}).get("trust", "l2")
    yes, no = ("yes", "no") if per_port else ("enabled", "disabled")
    summary: Tree = {
        "mode": qos.get("roce", {}).get("mode", "lossless"),
        "pfc": {
            "pfc-priority": ",".join(str(p) for p in _priorities(pfc.get("switch-priority"))),
            "rx-enabled": yes if pfc.get("rx") == "enable" else no,
            "tx-enabled": yes if pfc.get("tx") == "enable" else no,
        },
        "congestion-control": {
            "congestion-mode": "ecn, absolute" if per_port else "ECN",
            "enabled-tc": ",".join(str(tc) for tc in ecn_tcs),
            "min-threshold": roce_cc.get("min-threshold"),
            "max-threshold": roce_cc.get("max-threshold"),
            "probability": roce_cc.get("probability"),
        },
        "trust": {"trust-mode": _TRUST_MODE.get(str(trust), str(trust))},
        "lldp-app-tlv": {"priority": ROCE_PRIORITY, "protocol-id": 4791, "selector": "UDP"},
    }
    if not per_port:
        summary["enable"] = qos.get("roce", {}).get("enable", "off")
        summary["pfc"]["cable-length"] = pfc.get("cable-length")
    return summary


def filled_defaults(state: State) -> Tree:
    """The values NVUE fills in (what ``filled=false`` leaves out): the RoCE profile's tables and modes
    (only ``qos roce enable`` is set), each port's link defaults (``type`` is set: NVUE writes it into
    the configuration [PATCH]), and ``nvue_model.SYSTEM_DEFAULTS``."""
    qos = default_qos()
    del qos["roce"]["enable"]
    link = default_interface()
    del link["type"]
    ports = state["applied"].get("interface", {})
    return {
        "qos": qos,
        "interface": {name: copy.deepcopy(link) for name in ports if name.startswith("swp")},
        "system": copy.deepcopy(nvue_model.SYSTEM_DEFAULTS),
    }


def startup(state: State) -> Tree:
    """The startup configuration [SAVE]: the applied tree as last saved."""
    saved = state.get("startup")
    return copy.deepcopy(saved if saved is not None else state["applied"])


def view(state: State, rev: str, filled: bool = True) -> Tree | None:
    """The whole tree at revision ``rev`` ("applied", "startup", "operational", or a revision id); None if
    unknown. ``filled=False`` leaves out the values NVUE fills in (not for "operational": it is state)."""
    if rev == "applied":
        tree = copy.deepcopy(state["applied"])
    elif rev == "startup":
        tree = startup(state)
    elif rev == "operational":
        tree = merge(state["applied"], state.get("operational-override") or {})
        qos = tree.get("qos", {})
        if qos.get("roce", {}).get("enable") == "on":
            qos["roce"] = merge(qos["roce"], roce_summary(qos, per_port=False))
            status = roce_summary(qos, per_port=True)
            for port in tree.get("interface", {}).values():
                if isinstance(port, dict):
                    port.setdefault("qos", {}).setdefault("roce", {})["status"] = copy.deepcopy(status)
    elif rev in state.get("revisions", {}):
        tree = copy.deepcopy(state["revisions"][rev]["config"])
    else:
        return None
    if not filled and rev != "operational":
        tree = nvue_model.unfilled(tree, filled_defaults(state))
    tree["header"] = header(state)
    result: Tree = tree
    return result


# ---------------------------------------------------------------- validation


_ON_OFF = ("on", "off")
_ENABLE = ("enable", "disable")
# Leaf rules by key name, for keys under qos and interface link: (allowed strings) or (low, high).
_LEAF_RULES: dict[str, tuple[Any, ...]] = {
    "enable": _ON_OFF,
    "mode": ("lossy", "lossless", "lossless-single-ipool", "dwrr", "strict"),
    "trust": ("l2", "l3", "both", "port"),
    "rx": _ENABLE,
    "tx": _ENABLE,
    "ecn": _ENABLE,
    "red": _ENABLE,
    "switch-priority": (0, 7),
    "traffic-class": (0, 7),
    "port-default-sp": (0, 7),
    "probability": (0, 100),
    "bw-percent": (0, 100),
    "memory-percent": (0, 100),
    "cable-length": (1, 100000),
    "min-threshold": (1, 1 << 30),
    "max-threshold": (1, 1 << 30),
    "mtu": MTU_RANGE,
}
# Branches whose values are checked against the rules above; the others are kept as sent.
_CHECKED = ("qos", "interface")


def _check_leaf(where: str, key: str, value: Any) -> None:
    rule = _LEAF_RULES.get(key)
    if rule is None or value is None:  # null unsets [PATCH]
        return
    if isinstance(rule[0], str):
        if value not in rule:
            raise PatchError(f"'{value}' is not one of {list(rule)} at {where}")
        return
    if isinstance(value, bool) or not isinstance(value, int) or not rule[0] <= value <= rule[1]:
        raise PatchError(f"{value!r} is not an integer in {rule[0]}..{rule[1]} at {where}")


def check_path(path_parts: list[str]) -> None:
    """UnknownPath when the URL path is outside NVUE's objects (nvue_model [OBJECTS])."""
    if path_parts and path_parts[0] not in nvue_model.BRANCHES:
        raise UnknownPath("/".join(path_parts))


def validate(path_parts: list[str], payload: Any, ports: list[str]) -> None:
    """Refuse what NVUE's schema would refuse (PatchError): an object NVUE does not have in a root
    PATCH's body (jsonschema's wording), a port the switch lacks, a value out of range under qos or an
    interface. UnknownPath for a URL path outside NVUE's objects."""
    check_path(path_parts)
    if not isinstance(payload, dict):
        raise PatchError(f"the body must be a JSON object, got {type(payload).__name__}")

    def check(parts: list[str], node: Any) -> None:
        where = "/" + "/".join(parts)
        if len(parts) == 1 and parts[0] not in nvue_model.BRANCHES:
            raise PatchError(f"Additional properties are not allowed ('{parts[0]}' was unexpected)")
        if (
            len(parts) >= 2
            and parts[0] == "interface"
            and parts[1].startswith("swp")
            and parts[1] not in ports
        ):
            raise PatchError(f"interface {parts[1]} does not exist on this switch")
        if parts and parts[0] not in _CHECKED:
            return
        if isinstance(node, dict):
            # collections keyed by a number ("pcp": {"3": ...}) hold members, not rule names
            for key, value in node.items():
                if not isinstance(key, str) or not key:
                    raise PatchError(f"empty key at {where}")
                check([*parts, key], value)
            return
        key = parts[-1] if parts else ""
        if key.isdigit() and len(parts) >= 2:
            key = parts[-2]
        _check_leaf(where, key, node)

    wrapped: Any = payload
    for part in reversed(path_parts):
        wrapped = {part: wrapped}
    check([], wrapped)
    # a member id in a qos switch-priority or traffic-class collection is a priority or class
    for collection in ("switch-priority", "traffic-class", "pcp", "dscp"):
        _check_ids(["qos"], wrapped.get("qos"), collection)


def _check_ids(parts: list[str], node: Any, collection: str) -> None:
    limits = {"switch-priority": 7, "traffic-class": 7, "pcp": 7, "dscp": 63}[collection]
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        member = bool(parts) and parts[-1] == collection and isinstance(value, dict)
        if member and (not key.isdigit() or int(key) > limits):
            raise PatchError(f"{collection} {key} is not in 0..{limits} at /{'/'.join(parts)}")
        _check_ids([*parts, key], value, collection)


# ---------------------------------------------------------------- revisions


def new_revision_id(user: str) -> str:
    """``changeset/<user>/<YYYY-MM-DD_HH.MM.SS>_<XXXX>`` as [API]'s example shows."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d_%H.%M.%S")
    tail = "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(4))
    return f"changeset/{user}/{now}_{tail}"


def revision_body(revision: dict[str, Any]) -> Tree:
    # [API]: {"state": ..., "transition": {"issue": {}, "progress": ""}}
    return {
        "state": revision["state"],
        "transition": {
            "issue": copy.deepcopy(revision.get("issue", {})),
            "progress": revision.get("progress", ""),
        },
    }


def create_revision(state: State, user: str) -> str:
    revisions = state.setdefault("revisions", {})
    rev = new_revision_id(user)
    while rev in revisions:
        rev = new_revision_id(user)
    revisions[rev] = {"state": "pending", "config": copy.deepcopy(state["applied"]), "created": time.time()}
    while len(revisions) > MAX_REVISIONS:
        oldest = min(revisions, key=lambda r: revisions[r].get("created", 0.0))
        del revisions[oldest]
    return rev


def patch_revision(state: State, rev: str, path_parts: list[str], payload: Tree) -> Any:
    """Merge ``payload`` at ``path_parts`` into pending revision ``rev`` (PatchError if refused, a
    ``null`` unsetting its key); returns the change as NVUE answers it (nvue_model [PATCH]): the body
    and what NVUE added to it, at ``path_parts``."""
    revision = state["revisions"][rev]
    if revision["state"] != "pending":
        raise PatchError(f"revision {rev} is {revision['state']}, not pending; create a new revision")
    validate(path_parts, payload, list(state["applied"].get("interface", {})))
    wrapped: Tree = payload
    for part in reversed(path_parts):
        wrapped = {part: wrapped}
    change = nvue_model.autofilled(wrapped)
    nvue_model.unset(revision["config"], change)
    return walk(change, path_parts)


def delete_revision(state: State, rev: str) -> None:
    """Remove revision ``rev`` (KeyError if unknown); PatchError when it is applied or applying."""
    revision = state.get("revisions", {})[rev]
    if revision["state"] in ("applied", "apply"):
        raise PatchError(f"revision {rev} is {revision['state']}; only one not applied can be deleted")
    del state["revisions"][rev]


def pending(state: State) -> list[str]:
    """The revisions not applied and not being applied (what a client left behind)."""
    return sorted(r for r, v in state.get("revisions", {}).items() if v["state"] not in ("applied", "apply"))


def request_apply(state: State, rev: str, body: Tree, now: float) -> None:
    """Start applying ``rev``: "ays_fail" when the change asks "are you sure" (nvue_model.disruptive)
    and the body does not answer ``auto-prompt.ays: ays_yes``, else "apply" until settled."""
    revision = state["revisions"][rev]
    if revision["state"] != "pending":
        raise PatchError(f"revision {rev} is {revision['state']}; only a pending revision can be applied")
    prompt = body.get("auto-prompt")
    answered = isinstance(prompt, dict) and prompt.get("ays") == "ays_yes"
    if not answered and nvue_model.disruptive(state["applied"], revision["config"], state):
        revision["state"] = "ays_fail"
        revision["issue"] = copy.deepcopy(nvue_model.AYS_ISSUE)
        revision["progress"] = nvue_model.AYS_PROGRESS
        return
    revision["state"] = "apply"
    revision["progress"] = "Applying"
    revision["apply-at"] = now + float(state.get("apply-delay-s") or 0.0)
    settle(state, now)


def settle(state: State, now: float) -> bool:
    """Finish every apply whose time has come; True when the state changed."""
    changed = False
    for rev, revision in state.get("revisions", {}).items():
        if revision["state"] == "apply" and now >= float(revision.get("apply-at", 0.0)):
            if state.get("startup") is None:  # startup was the applied tree until now: keep it
                save_startup(state)
            state["applied"] = copy.deepcopy(revision["config"])
            state["applied-revision"] = rev
            revision["state"], revision["progress"] = "applied", ""
            if auto_save(state):
                save_startup(state)
            changed = True
    return changed


def auto_save(state: State) -> bool:
    """``system config auto-save enable`` of the applied configuration (on unless set off) [SAVE]."""
    system = state["applied"].get("system", {})
    return bool(system.get("config", {}).get("auto-save", {}).get("enable", "on") != "off")


def save_startup(state: State) -> None:
    """``nv config save``: the applied configuration becomes the startup one [SAVE]."""
    state["startup"] = copy.deepcopy(state["applied"])


def request_save(state: State, rev: str) -> None:
    """A save asked on revision ``rev``: "applied", or the id of the applied revision; PatchError else."""
    if rev not in ("applied", state.get("applied-revision")):
        raise PatchError(f"revision {rev} is not the applied revision; save PATCHes /revision/applied")
    save_startup(state)
