# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Every role's desired state compared with the node in one module run (gpufleet.node.node_facts).

Nothing here decides a setting on its own: each role's comparison is the one its module makes
(module_utils.rdma_apply, gpu_apply, gpu_desired, nccl_topo), run against a read-only view of the
module (:class:`RoleView`) that gives those functions the role's options, never writes, reads each
command's output once, and turns a role's failure into :class:`RoleFailed` so the other roles are
still compared.

The roles that write boot files (rdma_link, rdma_qos, gpu_power: module_utils.boot_files) also
return what their boot templates use of their module's result and what the node has of those files
and units; the action plugin renders the templates on the controller and compares (node_facts stays
one module run per node).

The roles are compared concurrently, and so are the ports within the RDMA roles: each of their
tools (mlxconfig, mlnx_qos, ethtool, nvidia-smi) takes from tens of milliseconds to a second on a
real node, so a node answers in about the time of its slowest tool instead of the sum of ~30.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from ansible_collections.gpufleet.node.plugins.module_utils import boot_files, nccl_topo
from ansible_collections.gpufleet.node.plugins.module_utils.gpu_apply import GpuPower, pinning_gpus
from ansible_collections.gpufleet.node.plugins.module_utils.gpu_desired import (
    PlanError,
    instance_change,
    pinning_plan,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import ParseError, read_ib_port
from ansible_collections.gpufleet.node.plugins.module_utils.rdma_apply import (
    LinkPort,
    QosInterface,
    plan_link_port,
    port_names,
    qos_desired,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma_desired import (
    link_checks,
    qos_changes,
    select_ports,
)

__all__ = ["ROLES", "RoleFailed", "RoleView", "compare_roles", "host_status"]

ROLES = ("rdma_link", "rdma_qos", "gpu_power", "nccl_topology", "gpu_pinning")


class RoleFailed(Exception):
    """A role's comparison could not be made on this node (its module would have failed)."""


# Threads per role for its ports: a node has 8 (B300) to 16 RDMA ports; more would only queue.
_PORT_WORKERS = 8


class Commands:
    """Each distinct command run once per module run, for every role that asks for it.

    Nothing changes the node in between, so one output serves all; a caller asking for a command
    that another thread is running waits for that run instead of starting a second one.
    """

    def __init__(self, module):
        self._module = module
        self._lock = threading.Lock()
        self._runs = {}

    def run(self, args, kwargs):
        key = (tuple(args), tuple(sorted((kwargs.get("environ_update") or {}).items())))
        with self._lock:
            future = self._runs.get(key)
            owner = future is None
            if owner:
                future = self._runs[key] = Future()
        if owner:
            try:
                future.set_result(self._module.run_command(args, **kwargs))
            except BaseException as exc:  # handed to every waiter, raised in each
                future.set_exception(exc)
        return future.result()


class RoleView:
    """What a role's module functions use of AnsibleModule, in check mode, with the role's options.

    Commands are run through the real module (same argv, same environment), each once per run
    (:class:`Commands`); fail_json raises RoleFailed.
    """

    check_mode = True
    _diff = False

    def __init__(self, module, params, commands=None):
        self._module = module
        self.params = params
        self._commands = commands or Commands(module)

    def run_command(self, args, **kwargs):
        return self._commands.run(args, kwargs)

    def get_bin_path(self, name, required=False, opt_dirs=None):
        path = self._module.get_bin_path(name, required=False, opt_dirs=opt_dirs)
        if path is None and required:
            raise RoleFailed("%s is not installed on this node (not on PATH)" % name)
        return path

    def fail_json(self, msg, **kwargs):
        raise RoleFailed(msg)

    def warn(self, warning):
        self._module.warn(warning)


def _nvidia_smi(view, path):
    if path is None:
        return view.get_bin_path("nvidia-smi", required=True)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise RoleFailed("nvidia_smi_path %s is not an executable file; point it at nvidia-smi" % path)
    return path


def _rdma_link(view, params):
    names = port_names()
    if not names:
        raise RoleFailed("No mlx5 RDMA devices under /sys/class/infiniband: load mlx5_core and mlx5_ib")
    chosen, unknown = select_ports({i: p["netdev"] for i, p in names.items()}, params.get("ports") or [])
    if unknown:
        raise RoleFailed(
            "ports: %s are not mlx5 RDMA devices or their netdevs on this node" % ", ".join(unknown)
        )
    mlxconfig = view.get_bin_path("mlxconfig") or view.get_bin_path("mstconfig")
    want = {"mtu": params["mtu"], "roce_mode": params["roce_mode"], "roce_tos": params["tos"]}

    def compare(ibdev):
        port = LinkPort(view, ibdev, names[ibdev]["port"], names[ibdev]["netdev"])
        plan, port_changes = plan_link_port(view, port, mlxconfig, params["link_type"], want)
        if not plan["runs"]:
            return port, plan, port_changes, []
        info, speed_mbps = port.link()
        return (
            port,
            plan,
            port_changes,
            link_checks(ibdev, port.netdev, info, speed_mbps, params.get("min_speed_gbps") or 0),
        )

    changes, checks, boot = [], [], []
    compared = _each(chosen, compare)
    # The boot script's lines, as the module returns them (cma_roce_mode is needed for any RoCE port).
    roce = any(plan["roce"] for _, plan, _, _ in compared)
    cma_tool = view.get_bin_path("cma_roce_mode", required=True) if roce else None
    for port, plan, port_changes, port_checks in compared:
        changes += port_changes
        checks += port_checks
        if plan["roce"]:
            boot += port.boot_commands(cma_tool, want)
    return changes, checks, {"boot_commands": boot}


def _rdma_qos(view, params):
    names = port_names()
    ethernet = [
        p["netdev"]
        for i, p in names.items()
        if p["netdev"] and read_ib_port(i, p["port"])["link_layer"] == "Ethernet"
    ]
    interfaces = params.get("interfaces") or ethernet
    unknown = [i for i in interfaces if i not in ethernet]
    if not interfaces or unknown:
        raise RoleFailed(
            "rdma_qos_interfaces: %s is not an mlx5 RoCE interface on this node; it has: %s"
            % (", ".join(unknown) or "none", ", ".join(ethernet) or "none")
        )
    desired = qos_desired(params)
    ibdevs = {p["netdev"]: i for i, p in names.items()}

    def compare(netdev):
        port = QosInterface(view, netdev, desired)
        result = {"interface": netdev, "ibdev": ibdevs[netdev], "boot_commands": port.boot_commands()}
        return qos_changes(netdev, port.read(), desired), result

    per_interface = _each(interfaces, compare)
    changes = [change for changes, _ in per_interface for change in changes]
    # The boot script loops over the role's registered results, one per interface.
    return changes, [], {"results": [result for _, result in per_interface]}


def _gpu_power(view, params):
    power = GpuPower(view)
    gpus = power.read_gpus()
    if not gpus:
        raise RoleFailed("nvidia-smi lists no GPU; check the driver before setting power limits")
    plan, method, _ = power.plan(gpus)
    boot = {
        "limits": dict((e["uuid"], e["target_w"]) for e in plan),
        "persistence_method": method,
        "nvidia_smi": power.smi,
    }
    return power.changes, [], boot


def _nccl_topology(view, params):
    smi = _nvidia_smi(view, params.get("nvidia_smi_path"))
    _, text, _, _, _ = nccl_topo.node_topology(view, smi, params["gdr"])
    change = nccl_topo.file_change(_read(params["path"]), text)
    return ([change] if change else []), [], None


def _gpu_pinning(view, params):
    instances = params.get("instances") or []
    if not instances:
        return [], [], None
    smi = _nvidia_smi(view, params.get("nvidia_smi_path"))
    gpus, domains = pinning_gpus(view, smi, any(not i.get("gpus") for i in instances))
    try:
        plan = pinning_plan(gpus, domains, instances, params["gpu_count"])
    except PlanError as exc:
        raise RoleFailed("Refusing to pin: %s" % exc) from exc
    changes = []
    for name, entry in plan.items():
        path = os.path.join(params["env_dir"], "%s.env" % name)
        _, _, change = instance_change(name, entry, params["nccl_topo_file"], _read(path))
        if change:
            changes.append(change)
    return changes, [], None


def _each(items, work):
    """``[work(item) for item in items]``, run concurrently; the first failure (in order) is raised."""
    if len(items) < 2:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(len(items), _PORT_WORKERS)) as pool:
        return list(pool.map(work, items))


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


_COMPARE = {
    "rdma_link": _rdma_link,
    "rdma_qos": _rdma_qos,
    "gpu_power": _gpu_power,
    "nccl_topology": _nccl_topology,
    "gpu_pinning": _gpu_pinning,
}


def _boot_state(view, files):
    """What the node has of a role's boot files: ``{"files": {path: {sha256, mode} or None},
    "units": {unit: enabled}}``; a unit is looked up (``systemctl is-enabled``, as the role's
    ansible.builtin.systemd_service does) only when its file is there."""
    found = {"files": {}, "units": {}}
    for entry in files:
        state = found["files"][entry["path"]] = boot_files.file_state(entry["path"])
        unit = entry.get("unit")
        if unit and state is not None:
            systemctl = view.get_bin_path("systemctl", required=True)
            rc, out, _ = view.run_command([systemctl, "is-enabled", unit], environ_update={"LC_ALL": "C"})
            found["units"][unit] = boot_files.unit_enabled(rc, out)
    return found


def _compare_role(role, view, files=None):
    try:
        changes, checks, boot_vars = _COMPARE[role](view, view.params)
        result = {"changes": changes, "checks": checks, "error": None}
        if files:
            result["boot"] = {"vars": boot_vars, "found": _boot_state(view, files)}
        return result
    except RoleFailed as exc:
        return {"changes": [], "checks": [], "error": str(exc)}
    except (ParseError, nccl_topo.TopologyError, OSError) as exc:
        return {"changes": [], "checks": [], "error": "could not read the node: %s" % exc}


def compare_roles(module, desired, boot=None):
    """``{role: {changes, checks, error}}`` per role in ``desired`` ({role: its options}), in ROLES order.

    The roles run concurrently and share one :class:`Commands`, so a command two roles need
    (nvidia-smi's GPU list, topo -m) runs once.

    ``boot`` (``{role: [{path, unit}]}``) names the boot files of a role to read: its result then has
    ``boot``, ``{"vars": what the role's boot templates use of its module's result, "found": what the
    node has}`` (see :func:`_boot_state`), for the action plugin to render and compare
    (:func:`boot_files.compare`). Not for a role whose comparison failed.
    """
    commands = Commands(module)
    boot = boot or {}
    roles = [role for role in ROLES if desired.get(role) is not None]
    with ThreadPoolExecutor(max_workers=max(len(roles), 1)) as pool:
        futures = [
            pool.submit(_compare_role, role, RoleView(module, desired[role], commands), boot.get(role))
            for role in roles
        ]
        return {role: future.result() for role, future in zip(roles, futures, strict=True)}


def host_status(results):
    """drifted / ok / failed for one node's compare_roles results (failed wins: a role could not be read)."""
    if any(r["error"] for r in results.values()) or any(
        not c["ok"] for r in results.values() for c in r["checks"]
    ):
        return "failed"
    return "drifted" if any(r["changes"] for r in results.values()) else "ok"
