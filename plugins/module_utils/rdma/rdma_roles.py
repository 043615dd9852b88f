# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the RDMA modules that change a node share: running a tool, writing a sysfs file,
naming the mlx5 ports. Each failure ends the module with a message the operator can act on.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import os
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_judge import (
    LINK_TYPES,
    QOS_SETTINGS,
    boot_line,
    change,
    ecn_writes,
    enabled_priorities,
    link_type_name,
    link_type_plan,
    mlnx_qos_args,
    mlxconfig_link_param,
    write_line,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_parse import (
    ParseError,
    parse_cma_roce_mode,
    parse_ethtool_pause,
    parse_mlnx_qos,
    parse_mlxconfig_query,
    parse_mlxconfig_set,
    parse_mlxlink,
)


def write_sysfs(module: Any, path: str, value: str, hint: str) -> None:
    """Write one value to a sysfs/configfs file as `echo value > path` does."""
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(value + "\n")
    except OSError as exc:
        module.fail_json(msg="Could not write %s to %s: %s. %s" % (value, path, exc.strerror or exc, hint))


def port_names() -> dict[str, dict[str, Any]]:
    """Every mlx5 RDMA device: {ibdev: {"port": n, "netdev": name or None}}, in device order.

    The netdev is the kernel's netdev of GID 0 (gid_attrs/ndevs/0), what ibdev2netdev prints.
    """
    names = {}
    for ibdev in rdma_read.mlx5_devices():
        port = rdma_read.first_port(ibdev)
        names[ibdev] = {"port": port, "netdev": rdma_read.read_ib_port(ibdev, port)["netdev"]}
    return names


# ------------------------------------------------------------------ rdma_link (and node_facts)

MODE_NUMBER = {"v1": "1", "v2": "2"}
ROCE_SETTINGS = ("mtu", "roce_mode", "roce_tos")


class LinkPort:
    """One mlx5 port of the rdma_link module: reads and sets its link type and RoCE defaults."""

    def __init__(self, module, ibdev, port, netdev):
        self.module, self.ibdev, self.port, self.netdev = module, ibdev, port, netdev
        self.configfs = rdma_read.sysfs_path("kernel", "config", "rdma_cm", ibdev)
        self.port_dir = os.path.join(self.configfs, "ports", str(port))
        self.mtu_path = rdma_read.sysfs_path("class", "net", netdev, "mtu") if netdev else None
        self.tos_path = os.path.join(self.port_dir, "default_roce_tos")
        self.pci_bus_id = rdma_read.read_ib_device(ibdev)["pci_bus_id"]
        self.param = mlxconfig_link_param(self.pci_bus_id)

    # -- link type ------------------------------------------------------
    def next_boot(self, tool):
        """'eth'/'ib'/'vpi' the firmware loads next, or None when the NIC has no LINK_TYPE setting."""
        cmd = [tool, "-d", self.pci_bus_id or self.ibdev, "q", self.param]
        rc, out, err = tool_runner.run(self.module, cmd, check=False)
        if rc != 0 and "doesn't support %s" % self.param in out + err:
            return None
        devices = tool_runner.parsed(
            self.module,
            cmd,
            (rc, out, err),
            parse_mlxconfig_query,
            "Check that MFT (mlxconfig) or mstflint (mstconfig) can open %s (run it as root)." % self.ibdev,
        )
        raw = devices[0]["params"].get(self.param, {}).get("next_boot")
        name = link_type_name(raw)
        if raw is not None and name is None:
            self.module.fail_json(
                msg="%s: %s is %r, not a link type this module knows" % (" ".join(cmd), self.param, raw)
            )
        return name

    def set_link_type(self, tool, link_type):
        value = "%s=%s" % (self.param, LINK_TYPES[link_type])
        cmd = [tool, "-y", "-d", self.pci_bus_id or self.ibdev, "set", value]
        result = tool_runner.run_parsed(
            self.module,
            cmd,
            parse_mlxconfig_set,
            "Check that the firmware of %s allows changing %s (a VPI NIC) and that it runs as root."
            % (self.ibdev, self.param),
        )
        if not result["applied"]:
            self.module.fail_json(
                msg="%s did not apply the new link type of %s (answer %r); run it by hand to see why"
                % (" ".join(cmd), self.ibdev, result["answer"]),
                cmd=cmd,
            )
        applied = link_type_name(result["devices"][0]["params"].get(self.param, {}).get("new"))
        if applied != link_type:
            self.module.fail_json(
                msg="%s left %s at %s, not %s; run it by hand to see why"
                % (" ".join(cmd), self.param, applied, link_type),
                cmd=cmd,
            )

    # -- RoCE settings -----------------------------------------------------
    def ensure_configfs_group(self):
        """The device's rdma_cm configfs group (a view of the defaults; creating it sets nothing)."""
        if os.path.isdir(self.port_dir):
            return
        parent = os.path.dirname(self.configfs)
        if not os.path.isdir(parent):
            self.module.fail_json(
                msg="%s does not exist: load rdma_cm (modprobe rdma_cm) and mount configfs on "
                "/sys/kernel/config to read and set the RoCE defaults of %s" % (parent, self.ibdev)
            )
        try:
            os.mkdir(self.configfs)
        except FileExistsError:
            pass
        except OSError as exc:
            self.module.fail_json(
                msg="Could not create the rdma_cm configfs group %s: %s" % (self.configfs, exc)
            )

    def read_roce(self):
        return {
            "mtu": rdma_read.read_netdev(self.netdev)["mtu"] if self.netdev else None,
            "roce_mode": rdma_read.read_roce_mode(self.ibdev, self.port),
            "roce_tos": rdma_read.read_roce_tos(self.ibdev, self.port),
        }

    def apply_roce(self, cma_tool, current, want):
        hint = "Check the mlx5 driver of %s (dmesg)." % self.ibdev
        if current["mtu"] != want["mtu"]:
            write_sysfs(self.module, self.mtu_path, str(want["mtu"]), hint)
        if current["roce_mode"] != want["roce_mode"]:
            cmd = [cma_tool, "-d", self.ibdev, "-p", str(self.port), "-m", MODE_NUMBER[want["roce_mode"]]]
            tool_runner.run_parsed(
                self.module, cmd, parse_cma_roce_mode, "Check that the rdma_cm module is loaded."
            )
        if current["roce_tos"] != want["roce_tos"]:
            self.ensure_configfs_group()
            write_sysfs(self.module, self.tos_path, str(want["roce_tos"]), hint)

    def boot_commands(self, cma_tool, want):
        mode = MODE_NUMBER[want["roce_mode"]]
        return [
            write_line(self.mtu_path, str(want["mtu"])),
            boot_line([cma_tool, "-d", self.ibdev, "-p", str(self.port), "-m", mode]),
            boot_line(["mkdir", "-p", self.configfs]),
            write_line(self.tos_path, str(want["roce_tos"])),
        ]

    # -- verification ------------------------------------------------------
    def link(self):
        port_info = rdma_read.read_ib_port(self.ibdev, self.port)
        net = rdma_read.read_netdev(self.netdev) if self.netdev else {"speed_mbps": None}
        return port_info, net["speed_mbps"]

    def diagnosis(self, tool):
        """mlxlink's recommendation for a port that is down, or None when it cannot say."""
        if tool is None:
            return None
        cmd = [tool, "-d", self.pci_bus_id or self.ibdev]
        rc, out, err = tool_runner.run(self.module, cmd, check=False)
        if rc != 0:
            return "could not run mlxlink: %s" % tool_runner.first_line(out, err)
        try:
            return parse_mlxlink(out)["recommendation"]
        except ParseError:
            return None


def link_change_name(setting, port):
    return "rdma_link.%s[%s]" % (setting, port.netdev if setting == "mtu" else port.ibdev)


def plan_link_port(module, port, mlxconfig, link_type, want):
    """Read one port and plan it: ``({link, runs, roce, before}, changes)``; changes nothing.

    ``mlxconfig`` is the mlxconfig/mstconfig path or None, ``want`` the wanted mtu, roce_mode and
    roce_tos. Fails the module when the port cannot be made ``link_type`` or has no netdev.
    """
    layer = rdma_read.read_ib_port(port.ibdev, port.port)["link_layer"]
    running = {"Ethernet": "eth", "InfiniBand": "ib"}.get(layer or "")
    if mlxconfig is None and running != link_type:
        module.fail_json(
            msg="%s runs %s and mlxconfig (MFT) or mstconfig (mstflint) is needed to make it %s; "
            "install one" % (port.ibdev, running, link_type)
        )
    next_boot = port.next_boot(mlxconfig) if mlxconfig else None
    link = link_type_plan(port.ibdev, layer, next_boot, link_type)
    if mlxconfig is None:
        link["hint"] = (
            "mlxconfig/mstconfig is not installed: the firmware link type of %s was not checked" % port.ibdev
        )
    runs = running == link_type
    roce = runs and running == "eth"
    before = {"link_type": next_boot}
    if roce and not port.netdev:
        module.fail_json(
            msg="%s is an Ethernet port without a netdev (no gid_attrs/ndevs/0), so its MTU and RoCE "
            "defaults cannot be set; check that mlx5_core created its interface (ip link)" % port.ibdev
        )
    if roce:
        port.ensure_configfs_group()
        before.update(port.read_roce())
    changes = [link["change"]] if link["change"] else []
    for setting in ROCE_SETTINGS if roce else ():
        if before[setting] != want[setting]:
            changes.append(change(link_change_name(setting, port), before[setting], want[setting]))
    return {"link": link, "runs": runs, "roce": roce, "before": before}, changes


# ------------------------------------------------------------------ rdma_qos (and node_facts)


def qos_desired(params):
    """The rdma_qos options as QOS_SETTINGS values (None: not managed)."""

    def prios(values):
        return None if values is None else sorted(set(values))

    return {
        "global_pause": params["global_pause"],
        "trust": params["trust"],
        "pfc": prios(params["pfc_priorities"]),
        "ecn_np": prios(params["ecn_priorities"]),
        "ecn_rp": prios(params["ecn_priorities"]),
        "cnp_dscp": params["cnp_dscp"],
    }


class QosInterface:
    """Reads and sets one interface's managed QoS settings (the rdma_qos module; node_facts reads)."""

    def __init__(self, module, netdev, desired):
        self.module = module
        self.netdev = netdev
        self.desired = desired
        self.ecn_dir = rdma_read.sysfs_path("class", "net", netdev, "ecn")
        self.dcbx = None
        wants = {name for name, value in desired.items() if value is not None}
        self.qos_tool = module.get_bin_path("mlnx_qos", required=True) if wants & {"trust", "pfc"} else None
        self.ethtool = module.get_bin_path("ethtool", required=True) if "global_pause" in wants else None

    def _mlnx_qos(self, args):
        return tool_runner.run_parsed(
            self.module,
            [self.qos_tool, "-i", self.netdev, *args],
            parse_mlnx_qos,
            "Check that %s is an mlx5 netdev and that mlnx_qos runs as root." % self.netdev,
        )

    def _pause(self):
        pause = tool_runner.run_parsed(
            self.module,
            [self.ethtool, "-a", self.netdev],
            parse_ethtool_pause,
            "Check that %s is up in the kernel and that ethtool runs as root." % self.netdev,
        )
        return (
            pause["rx"]
            if pause["rx"] == pause["tx"]
            else "rx %s, tx %s"
            % (
                "on" if pause["rx"] else "off",
                "on" if pause["tx"] else "off",
            )
        )

    def read(self):
        want = self.desired
        current = dict.fromkeys(QOS_SETTINGS)
        if want["global_pause"] is not None:
            current["global_pause"] = self._pause()
        if self.qos_tool:
            qos = self._mlnx_qos([])
            self.dcbx = qos["dcbx_mode"]
            if want["trust"] is not None and qos["trust"] is None:
                self.module.fail_json(
                    msg="mlnx_qos -i %s does not show a priority trust state (%s), so trust cannot be set "
                    "or verified here; install a newer MLNX_OFED/DOCA mlnx_qos or leave trust unset"
                    % (self.netdev, "; ".join(qos["warnings"]) or "no 'Priority trust state' line")
                )
            current["trust"], current["pfc"] = qos["trust"], qos["pfc_enabled"]
        if want["ecn_np"] is not None or want["cnp_dscp"] is not None:
            try:
                ecn = rdma_read.read_ecn(self.netdev)
            except ParseError as exc:
                self.module.fail_json(msg="Could not read the ECN settings of %s: %s" % (self.netdev, exc))
            missing = [
                name
                for name, value, wanted in (
                    ("ecn/roce_np/enable", ecn["np"], want["ecn_np"]),
                    ("ecn/roce_rp/enable", ecn["rp"], want["ecn_rp"]),
                    ("ecn/roce_np/cnp_dscp", ecn["cnp_dscp"], want["cnp_dscp"]),
                )
                if wanted is not None and value is None
            ]
            if missing:
                self.module.fail_json(
                    msg="%s has no %s under /sys/class/net/%s: the mlx5 driver of MLNX_OFED/DOCA-OFED "
                    "provides them; install it, or leave ecn_priorities and cnp_dscp unset"
                    % (self.netdev, ", ".join(missing), self.netdev)
                )
            current["ecn_np"] = enabled_priorities(ecn["np"])
            current["ecn_rp"] = enabled_priorities(ecn["rp"])
            current["cnp_dscp"] = ecn["cnp_dscp"]
        return current

    def apply(self, current):
        want = self.desired
        if want["global_pause"] is not None and current["global_pause"] != want["global_pause"]:
            value = "on" if want["global_pause"] else "off"
            tool_runner.run_parsed(
                self.module,
                [self.ethtool, "-A", self.netdev, "rx", value, "tx", value],
                None,
                "mlx5 refuses global pause changes while autonegotiation of pause is on, or without root.",
            )
        args = mlnx_qos_args(current, want)
        if args:
            self._mlnx_qos(args)
        for path, value in ecn_writes(self.ecn_dir, current, want):
            write_sysfs(self.module, path, value, "Check that the mlx5 driver of %s is loaded." % self.netdev)

    def boot_commands(self):
        want, lines = self.desired, []
        if want["global_pause"] is not None:
            value = "on" if want["global_pause"] else "off"
            lines.append(boot_line([self.ethtool, "-A", self.netdev, "rx", value, "tx", value]))
        args = mlnx_qos_args({}, want)
        if args:
            lines.append(boot_line([self.qos_tool, "-i", self.netdev, *args]))
        lines += [write_line(path, value) for path, value in ecn_writes(self.ecn_dir, {}, want, False)]
        return lines
