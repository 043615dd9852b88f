"""Parsers of plugins/module_utils/rdma/rdma.py on real captured outputs, and the sysfs readers.

Every file in tests/fixtures/real/mellanox has a case below (a test fails if one is added
without one). Formats with no capture in the fixtures are checked on real outputs published
elsewhere, quoted below with their source (search-index id where the repository is not named).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_parse, rdma_read

from tests.unit.mutations import FIXTURES

MELLANOX = FIXTURES / "mellanox"


def _read(name: str) -> str:
    return (MELLANOX / name).read_text(encoding="utf-8")


# ------------------------------------------------------------------ checks per capture


def _ethtool(info: dict[str, Any]) -> None:
    assert info["driver"] == "mlx5_core"
    assert info["version"] == "23.10-1.1.9"
    assert (info["fw_version"], info["psid"]) == ("28.39.3560", "MT_0000000838")
    assert info["bus_info"] == "0000:e6:00.0"
    assert info["expansion_rom_version"] is None


def _qos_3fs(qos: dict[str, Any]) -> None:
    assert qos["dcbx_mode"] == "OS controlled"
    assert qos["trust"] == "dscp"
    assert qos["pfc"] == [0, 0, 0, 0, 0, 1, 0, 0]
    assert qos["pfc_enabled"] == [5]
    assert qos["prio2buffer"] == [0, 0, 0, 0, 0, 1, 0, 0]
    assert len(qos["dscp2prio"]) == 64
    # custom map on that node: DSCP 40 moved to priority 5, 48 kept on 6
    assert (qos["dscp2prio"][40], qos["dscp2prio"][48], qos["dscp2prio"][26]) == (5, 6, 3)
    assert qos["default_priority"] is None
    assert qos["receive_buffer_size"] == [19872, 220896, 0, 0, 0, 0, 0, 0]
    assert qos["receive_buffer_total"] == 4151520
    assert qos["cable_len"] == 30
    assert qos["tc"][2] == {"ratelimit_gbps": None, "tsa": "ets", "bw_pct": 80, "priorities": [2]}
    assert qos["tc"][5]["tsa"] == "strict" and qos["tc"][5]["bw_pct"] is None
    assert qos["prio_tc"] == {p: p for p in range(8)}
    assert qos["warnings"] == []


def _ibstatus_azhpc(ports: list[dict[str, Any]]) -> None:
    assert [(p["ca"], p["port"]) for p in ports] == [("mlx5_an0", 1), ("mlx5_ib0", 1)]
    eth, ib = ports
    assert (eth["state"], eth["state_code"], eth["phys_state"], eth["phys_state_code"]) == (
        "ACTIVE",
        4,
        "LinkUp",
        5,
    )
    assert (eth["rate_gbps"], eth["width"], eth["speed"], eth["link_layer"]) == (40, 4, "QDR", "Ethernet")
    assert eth["default_gid"] is None
    assert (ib["rate"], ib["rate_gbps"], ib["link_layer"]) == ("200 Gb/sec (4X HDR)", 200, "InfiniBand")
    assert (ib["base_lid"], ib["sm_lid"]) == (0x96, 0x11C)
    assert ib["default_gid"] == "fe80:0000:0000:0000:0015:5dff:fd33:ff0b"


def _ibdev2netdev_cnode3(entries: list[dict[str, Any]]) -> None:
    assert len(entries) == 11
    # ibdev2netdev walks `ls /sys/class/infiniband`: mlx5_10 sorts after mlx5_1
    assert [e["ibdev"] for e in entries[:3]] == ["mlx5_0", "mlx5_1", "mlx5_10"]
    assert entries[0] == {"ibdev": "mlx5_0", "port": 1, "netdev": "ibp24s0", "up": True}
    assert [e["netdev"] for e in entries if not e["up"]] == ["enp41s0f0np0", "enp41s0f1np1"]
    assert entries[8] == {"ibdev": "mlx5_7", "port": 1, "netdev": "enp170s0np0", "up": True}


def _mlxlink_csegpu1(link: dict[str, Any]) -> None:
    assert (link["state"], link["physical_state"], link["speed"], link["width"]) == (
        "Active",
        "LinkUp",
        "IB-NDR",
        "4x",
    )
    assert (link["speed_gbps"], link["lanes"]) == (400, 4)
    assert link["fec"] == "Ethernet_Consortium_LL_50G_RS_FEC_PLR -(272,257+1)"  # trailing space stripped
    assert (link["loopback"], link["auto_negotiation"]) == ("No Loopback", "ON")
    assert link["enabled_link_speed"] == {"mask": 0xF1, "speeds": ["NDR", "HDR", "EDR", "FDR", "SDR"]}
    assert link["supported_cable_speed"] == link["enabled_link_speed"]
    assert (link["status_opcode"], link["group_opcode"], link["recommendation"]) == (
        0,
        None,
        "No issue was observed",
    )
    assert (link["firmware_version"], link["amber_version"], link["mft_version"]) == (
        "28.46.3048",
        "6.4",
        "4.35.0-159",
    )
    module = link["module"]
    assert module["Identifier"] == "OSFP"
    assert module["Vendor Part Number"] == "OSFPFL-400G-PC01"
    assert module["Rx LOS [per lane]"] == "1,0,1,1"
    assert len(module) == 53


def _mlxlink_gce(link: dict[str, Any]) -> None:
    assert (link["state"], link["physical_state"], link["speed"], link["width"]) == (
        "Active",
        None,
        "NVLink-XDR",
        "2x",
    )
    assert link["speed_gbps"] == 400  # XDR is 200 Gb/s per lane
    assert link["enabled_link_speed"] == {"mask": 0x100, "speeds": ["XDR"]}
    assert link["supported_cable_speed"] is None
    assert link["firmware_version"] == "36.2014.1676"
    assert link["mft_version"] == "4.32.0-120"  # printed as "mft 4.32.0-120"
    assert link["module"] is None


def _ibstat_a100(cas: list[dict[str, Any]]) -> None:
    assert [ca["ca"] for ca in cas] == [f"mlx5_{i}" for i in range(9)]
    assert {ca["ca_type"] for ca in cas} == {"MT4126"}
    first = cas[0]
    assert (first["firmware_version"], first["node_guid"], first["num_ports"]) == (
        "22.35.2302",
        "0x1e918efffe7a03a0",
        1,
    )
    assert first["ports"][0]["link_layer"] == "Ethernet"
    assert [ca["ports"][0]["link_layer"] for ca in cas[1:]] == ["InfiniBand"] * 8
    assert all(p["state"] == "Active" and p["rate_gbps"] == 200 for ca in cas for p in ca["ports"])
    assert cas[8]["ports"][0] == {
        "port": 1,
        "state": "Active",
        "physical_state": "LinkUp",
        "rate_gbps": 200,
        "base_lid": 1396,
        "lmc": 0,
        "sm_lid": 83,
        "capability_mask": "0xa651ec48",
        "port_guid": "0x4c1037318e9cd20a",
        "link_layer": "InfiniBand",
    }


def _ibstat_h100(cas: list[dict[str, Any]]) -> None:
    assert len(cas) == 12
    rates = {ca["ca_type"]: {p["rate_gbps"] for p in ca["ports"]} for ca in cas}
    assert rates == {"MT4129": {400}, "MT4125": {100}}
    assert sum(ca["ca_type"] == "MT4129" for ca in cas) == 8
    assert {p["link_layer"] for ca in cas for p in ca["ports"]} == {"Ethernet"}
    assert cas[2]["ca"] == "mlx5_10" and cas[2]["firmware_version"] == "28.39.1002"


def _ibstatus_gpud(ports: list[dict[str, Any]]) -> None:
    assert len(ports) == 9
    assert all(p["state"] == "ACTIVE" and p["phys_state"] == "LinkUp" for p in ports)
    assert [p["rate_gbps"] for p in ports] == [200] * 8 + [40]
    assert [p["link_layer"] for p in ports] == ["InfiniBand"] * 8 + ["Ethernet"]
    assert ports[0]["base_lid"] == 0x33BF


def _gids_openshift(gids: list[dict[str, Any]]) -> None:
    assert [(g["index"], g["ver"], g["ipv4"]) for g in gids] == [
        (0, "v1", None),
        (1, "v2", None),
        (2, "v1", "192.168.10.2"),
        (3, "v2", "192.168.10.2"),
    ]
    assert {(g["dev"], g["port"], g["netdev"]) for g in gids} == {("mlx5_3", 1, "net1")}
    assert gids[3]["gid"] == "0000:0000:0000:0000:0000:ffff:c0a8:0a02"


def _gids_bond(gids: list[dict[str, Any]]) -> None:
    assert len(gids) == 4
    assert {g["dev"] for g in gids} == {"mlx5_bond_0"}
    assert {g["netdev"] for g in gids} == {"bond0"}
    roce_v2_ipv4 = [g for g in gids if g["ver"] == "v2" and g["ipv4"]]
    assert [(g["index"], g["ipv4"]) for g in roce_v2_ipv4] == [(3, "10.96.83.26")]


CAPTURES: dict[str, tuple[Callable[[str], Any], Callable[[Any], None]]] = {
    "3fs-doc-ethtool-i-ens4np0-cx7.txt": (rdma_parse.parse_ethtool_info, _ethtool),
    "3fs-doc-mlnx_qos-ens4np0-cx7-ofed23.10.txt": (rdma_parse.parse_mlnx_qos, _qos_3fs),
    "azhpc-diag-ibstatus-ndv4.txt": (rdma_parse.parse_ibstatus, _ibstatus_azhpc),
    "cnode3-011-ibdev2netdev-h100-cluster.txt": (rdma_parse.parse_ibdev2netdev, _ibdev2netdev_cnode3),
    "csegpu1-mlxlink-show_module-cx7-mt4129-IB-NDR-osfp.txt": (rdma_parse.parse_mlxlink, _mlxlink_csegpu1),
    "gce-bugreport-mlxlink-gpu-nvlink-XDR-netir.txt": (rdma_parse.parse_mlxlink, _mlxlink_gce),
    "gpud-ibstat.47.0.a100.all.active.0.txt": (rdma_parse.parse_ibstat, _ibstat_a100),
    "gpud-ibstat.47.0.h100.all.active.0.txt": (rdma_parse.parse_ibstat, _ibstat_h100),
    "gpud-ibstatus.39.0.a100.all.active.0.txt": (rdma_parse.parse_ibstatus, _ibstatus_gpud),
    "openshift-nvidiatools-show_gids-mlx5_3-net1.txt": (rdma_parse.parse_show_gids, _gids_openshift),
    "rdma-notes-show_gids-mlx5_bond_0.txt": (rdma_parse.parse_show_gids, _gids_bond),
}


def test_every_mellanox_capture_has_a_case() -> None:
    assert sorted(p.name for p in MELLANOX.iterdir()) == sorted(CAPTURES)


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_real_capture(name: str) -> None:
    parser, check = CAPTURES[name]
    check(parser(_read(name)))


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_truncated_capture_is_a_parse_error(name: str) -> None:
    """Every capture cut mid-line (as by a dropped SSH session) is refused, never half-read."""
    parser, _ = CAPTURES[name]
    text = _read(name)
    marker, offset = {
        # a cut that leaves a line no tool prints, or drops a part the format requires
        "3fs-doc-ethtool-i-ens4np0-cx7.txt": ("driver", 3),
        "3fs-doc-mlnx_qos-ens4np0-cx7-ofed23.10.txt": ("enabled", 20),
        "azhpc-diag-ibstatus-ndv4.txt": ("link_layer:      InfiniBand", 0),
        "cnode3-011-ibdev2netdev-h100-cluster.txt": ("(Up)", 2),
        "csegpu1-mlxlink-show_module-cx7-mt4129-IB-NDR-osfp.txt": ("Physical state", 8),
        "gce-bugreport-mlxlink-gpu-nvlink-XDR-netir.txt": ("Operational Info", 5),
        "gpud-ibstat.47.0.a100.all.active.0.txt": ("\tPort 1:", 8),
        "gpud-ibstat.47.0.h100.all.active.0.txt": ("CA 'mlx5_1'", 20),
        "gpud-ibstatus.39.0.a100.all.active.0.txt": ("phys state", 0),
        "openshift-nvidiatools-show_gids-mlx5_3-net1.txt": ("n_gids_found", 0),
        "rdma-notes-show_gids-mlx5_bond_0.txt": ("0a60:531a", 4),
    }[name]
    cut = text[: text.index(marker) + offset]
    with pytest.raises(rdma_parse.ParseError):
        parser(cut)


# ------------------------------------------------------------------ mlnx_qos, other layouts

# The TC section the three captures below end with, the same in each: every TC "vendor" (no ETS), and
# the firmware's default map (priority 1 in TC 0, priority 0 in TC 1, priority N in TC N for the rest).
VENDOR_TCS = (
    "tc: 0 ratelimit: unlimited, tsa: vendor\n"
    "         priority:  1\n"
    "tc: 1 ratelimit: unlimited, tsa: vendor\n"
    "         priority:  0\n"
    "tc: 2 ratelimit: unlimited, tsa: vendor\n"
    "         priority:  2\n"
    "tc: 3 ratelimit: unlimited, tsa: vendor\n"
    "         priority:  3\n"
    "tc: 4 ratelimit: unlimited, tsa: vendor\n"
    "         priority:  4\n"
    "tc: 5 ratelimit: unlimited, tsa: vendor\n"
    "         priority:  5\n"
    "tc: 6 ratelimit: unlimited, tsa: vendor\n"
    "         priority:  6\n"
    "tc: 7 ratelimit: unlimited, tsa: vendor\n"
    "         priority:  7\n"
)

# att/netarbiter nvmf/OUTPUTSAMPLE.setup-nic-lossless-layer3.sh.md (commit 2c2682e6298c), lines 5-36:
# no "default priority", no receive buffers, no buffer row, TSA vendor, firmware prio->tc map.
QOS_NETARBITER = (
    "DCBX mode: OS controlled\n"
    "Priority trust state: dscp\n"
    "dscp2prio mapping:\n"
    "        prio:0 dscp:07,06,05,04,03,02,01,00,\n"
    "        prio:1 dscp:15,14,13,12,11,10,09,08,\n"
    "        prio:2 dscp:23,22,21,20,19,18,17,16,\n"
    "        prio:3 dscp:31,30,29,28,27,26,25,24,\n"
    "        prio:4 dscp:39,38,37,36,35,34,33,32,\n"
    "        prio:5 dscp:47,46,45,44,43,42,41,40,\n"
    "        prio:6 dscp:55,54,53,52,51,50,49,48,\n"
    "        prio:7 dscp:63,62,61,60,59,58,57,56,\n"
    "Cable len: 7\n"
    "PFC configuration:\n"
    "        priority    0   1   2   3   4   5   6   7\n"
    "        enabled     0   0   0   1   0   0   0   0   \n" + VENDOR_TCS
)

# Search-index id 41105564267 (RoCE notes, host centos12): trust pcp, so no dscp2prio block;
# receive buffers without a total.
QOS_PCP = (
    "DCBX mode: OS controlled\n"
    "Priority trust state: pcp\n"
    "Receive buffer size (bytes): 524160,0,0,0,0,0,0,0,\n"
    "Cable len: 7\n"
    "PFC configuration:\n"
    "        priority    0   1   2   3   4   5   6   7\n"
    "        enabled     0   0   0   0   0   0   0   0   \n"
    "        buffer      0   0   0   0   0   0   0   0   \n" + VENDOR_TCS
)

# Search-index id 41001320304: a DSCP moved between priorities splits a priority's list over
# two lines ("prio:6" twice); buffers per priority.
QOS_SPLIT_DSCP = (
    "dscp2prio mapping:\n"
    "        prio:0 dscp:07,06,05,04,03,02,01,00,\n"
    "        prio:1 dscp:15,14,13,12,11,10,09,08,\n"
    "        prio:2 dscp:23,22,21,20,19,18,17,16,\n"
    "        prio:3 dscp:31,29,28,27,26,25,24,\n"
    "        prio:4 dscp:39,38,37,36,35,34,33,32,\n"
    "        prio:5 dscp:47,46,45,44,43,42,41,40,\n"
    "        prio:6 dscp:30,55,54,53,52,51,50,49,\n"
    "        prio:6 dscp:48,\n"
    "        prio:7 dscp:63,62,61,60,59,58,57,56,\n"
    "Receive buffer size (bytes): 80256,80256,896,80256,896,896,896,896,\n"
    "Cable len: 7\n"
    "PFC configuration:\n"
    "        priority    0   1   2   3   4   5   6   7\n"
    "        enabled     0   0   0   1   0   0   0   0   \n"
    "        buffer      0   2   5   7   1   2   3   6   \n" + VENDOR_TCS
)

# Search-index id 310222282 (RoCE setup notes), from the buffer line on: ETS with several
# priorities in one TC.
QOS_ETS_GROUPS = (
    "Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,max_buffer_size=262016\n"
    "Cable len: 7\n"
    "PFC configuration:\n"
    "        priority    0   1   2   3   4   5   6   7\n"
    "        enabled     0   0   0   1   0   0   0   0   \n"
    "        buffer      0   0   0   1   0   0   0   0   \n"
    "tc: 0 ratelimit: unlimited, tsa: ets, bw: 50%\n"
    "         priority:  0\n"
    "         priority:  1\n"
    "         priority:  2\n"
    "         priority:  4\n"
    "         priority:  5\n"
    "         priority:  7\n"
    "tc: 3 ratelimit: unlimited, tsa: ets, bw: 50%\n"
    "         priority:  3\n"
    "tc: 6 ratelimit: unlimited, tsa: vendor\n"
    "         priority:  6\n"
)

# MLNX_OFED 4.2 community page DOC-2792 "mlnx_qos" (community.mellanox.com), the -f example as
# the page renders it: the oldest layout, no DCBX/trust lines, blank lines between rows.
QOS_OLDEST = "PFC configuration:\n\npriority 0 1 2 3 4 5 6 7\n\nenabled 0 0 0 1 0 0 0 0\n"

# Old kernels list socket priorities under each user priority ("up:"), with a lldpad warning.
QOS_UP_SKPRIO = (
    "****** WARNING: lldpad service is running and may overwrite your settings ******\n"
    "\n"
    "PFC configuration:\n"
    "\tpriority    0   1   2   3   4   5   6   7\n"
    "\tenabled     0   0   0   0   1   0   0   0   \n"
    "\n"
    "tc: 0 ratelimit: unlimited, tsa: vendor\n"
    "\t up:  0\n"
    "\t\t skprio: 0\n"
    "\t\t skprio: 2 (tos: 8)\n"
    "\t up:  4\n"
)


def test_mlnx_qos_older_layout_netarbiter() -> None:
    qos = rdma_parse.parse_mlnx_qos(QOS_NETARBITER)
    assert (qos["trust"], qos["pfc"], qos["pfc_enabled"]) == ("dscp", [0, 0, 0, 1, 0, 0, 0, 0], [3])
    assert (qos["receive_buffer_size"], qos["prio2buffer"], qos["default_priority"]) == (None, None, None)
    assert qos["dscp2prio"] == {d: d // 8 for d in range(64)}
    assert (qos["prio_tc"][0], qos["prio_tc"][1], qos["prio_tc"][3]) == (1, 0, 3)
    assert {tc["tsa"] for tc in qos["tc"].values()} == {"vendor"}


def test_mlnx_qos_pcp_trust() -> None:
    qos = rdma_parse.parse_mlnx_qos(QOS_PCP)
    assert (qos["trust"], qos["dscp2prio"], qos["pfc_enabled"]) == ("pcp", {}, [])
    assert (qos["receive_buffer_size"], qos["receive_buffer_total"]) == ([524160, 0, 0, 0, 0, 0, 0, 0], None)


def test_mlnx_qos_split_dscp_lines() -> None:
    qos = rdma_parse.parse_mlnx_qos(QOS_SPLIT_DSCP)
    assert (qos["dscp2prio"][30], qos["dscp2prio"][48], qos["dscp2prio"][26]) == (6, 6, 3)
    assert len(qos["dscp2prio"]) == 64
    assert qos["prio2buffer"] == [0, 2, 5, 7, 1, 2, 3, 6]
    assert qos["trust"] is None


def test_mlnx_qos_ets_groups() -> None:
    qos = rdma_parse.parse_mlnx_qos(QOS_ETS_GROUPS)
    assert qos["tc"][0] == {
        "ratelimit_gbps": None,
        "tsa": "ets",
        "bw_pct": 50,
        "priorities": [0, 1, 2, 4, 5, 7],
    }
    assert qos["prio_tc"] == {0: 0, 1: 0, 2: 0, 3: 3, 4: 0, 5: 0, 6: 6, 7: 0}
    assert qos["receive_buffer_total"] == 262016


def test_mlnx_qos_oldest_layout() -> None:
    qos = rdma_parse.parse_mlnx_qos(QOS_OLDEST)
    assert (qos["trust"], qos["dcbx_mode"], qos["pfc"], qos["tc"]) == (
        None,
        None,
        [0, 0, 0, 1, 0, 0, 0, 0],
        {},
    )


def test_mlnx_qos_up_and_skprio_lines() -> None:
    qos = rdma_parse.parse_mlnx_qos(QOS_UP_SKPRIO)
    assert qos["pfc_enabled"] == [4]
    assert qos["tc"][0]["priorities"] == [0, 4]
    assert qos["warnings"] == [
        "****** WARNING: lldpad service is running and may overwrite your settings ******"
    ]


def test_mlnx_qos_ratelimit() -> None:
    qos = rdma_parse.parse_mlnx_qos(QOS_OLDEST + "tc: 0 ratelimit: 100.0 Gbps, tsa: vendor\n")
    assert qos["tc"][0]["ratelimit_gbps"] == 100


# ------------------------------------------------------------------ mlxlink, other layouts

# Search-index id 55597941938 (`mlxlink -d /dev/mst/mt41692_pciconf0 -p 1 -m -c`, BlueField-3, MFT
# 4.30), Operational to Tool Information: an Ethernet port, "(Ext.)" speed masks.
MLXLINK_ETH_100G = (
    "\n"
    "Operational Info\n"
    "----------------\n"
    "State                              : Active\n"
    "Physical state                     : LinkUp\n"
    "Speed                              : 100G\n"
    "Width                              : 4x\n"
    "FEC                                : Standard RS-FEC - RS(528,514)\n"
    "Loopback Mode                      : No Loopback\n"
    "Auto Negotiation                   : ON\n"
    "\n"
    "Supported Info\n"
    "--------------\n"
    "Enabled Link Speed (Ext.)          : 0x00000200 (100G_4X)\n"
    "Supported Cable Speed (Ext.)       : 0x000002f2 (100G_4X,50G_2X,40G,25G,10G,1G)\n"
    "\n"
    "Troubleshooting Info\n"
    "--------------------\n"
    "Status Opcode                      : 0\n"
    "Group Opcode                       : N/A\n"
    "Recommendation                     : No issue was observed\n"
    "\n"
    "Tool Information\n"
    "----------------\n"
    "Firmware Version                   : 32.43.2402\n"
    "amBER Version                      : 3.6\n"
    "MFT Version                        : mft 4.30.1-8\n"
)

# Search-index id 34834585618 (ConnectX-5 setup notes, an rst code block indented 4): a PHY FW
# troubleshooting opcode.
MLXLINK_OPCODE_25 = (
    "    Operational Info\n"
    "    ----------------\n"
    "    State                              : Active\n"
    "    Physical state                     : LinkUp\n"
    "    Speed                              : IB-SDR\n"
    "    Width                              : 4x\n"
    "    FEC                                : No FEC\n"
    "    Loopback Mode                      : No Loopback\n"
    "    Auto Negotiation                   : ON\n"
    "\n"
    "    Supported Info\n"
    "    --------------\n"
    "    Enabled Link Speed                 : 0x00000001 (SDR)\n"
    "    Supported Cable Speed              : 0x00000001 (SDR)\n"
    "\n"
    "    Troubleshooting Info\n"
    "    --------------------\n"
    "    Status Opcode                      : 25\n"
    "    Group Opcode                       : PHY FW\n"
    "    Recommendation                     : Cable speed not enabled\n"
    "\n"
    "    Tool Information\n"
    "    ----------------\n"
    "    Firmware Version                   : 16.35.4506\n"
    "    MFT Version                        : mft 4.30.1-113\n"
)

# Search-index id 40884072527 (Ubuntu host, ConnectX-6 Dx, MFT 4.22): 32-column keys,
# ETH_AN_FSM_ENABLE as the physical state of an active Ethernet port.
MLXLINK_MFT_4_22 = (
    "\n"
    "Operational Info\n"
    "----------------\n"
    "State                           : Active\n"
    "Physical state                  : ETH_AN_FSM_ENABLE\n"
    "Speed                           : 100G\n"
    "Width                           : 4x\n"
    "FEC                             : Standard RS-FEC - RS(528,514)\n"
    "Loopback Mode                   : No Loopback\n"
    "Auto Negotiation                : ON\n"
    "\n"
    "Supported Info\n"
    "--------------\n"
    "Enabled Link Speed (Ext.)       : 0x000007f2 (100G_2X,100G_4X,50G_1X,50G_2X,40G,25G,10G,1G)\n"
    "Supported Cable Speed (Ext.)    : 0x000002f2 (100G_4X,50G_2X,40G,25G,10G,1G)\n"
    "\n"
    "Troubleshooting Info\n"
    "--------------------\n"
    "Status Opcode                   : 0\n"
    "Group Opcode                    : N/A\n"
    "Recommendation                  : No issue was observed\n"
    "\n"
    "Tool Information\n"
    "----------------\n"
    "Firmware Version                : 22.36.1010\n"
    "amBER Version                   : 2.08\n"
    "MFT Version                     : mft 4.22.1-520\n"
)

# Same source: ibstatus of a down RoCE port next to an active one.
IBSTATUS_DOWN = (
    "Infiniband device 'mlx5_0' port 1 status:\n"
    "        default gid:     fe80:0000:0000:0000:c670:bdff:feaa:1fc8\n"
    "        base lid:        0x0\n"
    "        sm lid:          0x0\n"
    "        state:           1: DOWN\n"
    "        phys state:      3: Disabled\n"
    "        rate:            40 Gb/sec (4X QDR)\n"
    "        link_layer:      Ethernet\n"
    "\n"
    "Infiniband device 'mlx5_1' port 1 status:\n"
    "        default gid:     fe80:0000:0000:0000:c670:bdff:feaa:1fc9\n"
    "        base lid:        0x0\n"
    "        sm lid:          0x0\n"
    "        state:           4: ACTIVE\n"
    "        phys state:      5: LinkUp\n"
    "        rate:            100 Gb/sec (4X EDR)\n"
    "        link_layer:      Ethernet\n"
)


def test_mlxlink_ethernet() -> None:
    link = rdma_parse.parse_mlxlink(MLXLINK_ETH_100G)
    assert (link["speed"], link["speed_gbps"], link["fec"]) == ("100G", 100, "Standard RS-FEC - RS(528,514)")
    assert link["enabled_link_speed"] == {"mask": 0x200, "speeds": ["100G_4X"]}
    assert link["supported_cable_speed"]["speeds"] == ["100G_4X", "50G_2X", "40G", "25G", "10G", "1G"]
    assert link["module"] is None


def test_mlxlink_troubleshooting_opcode() -> None:
    link = rdma_parse.parse_mlxlink(MLXLINK_OPCODE_25)
    assert (link["status_opcode"], link["group_opcode"], link["recommendation"]) == (
        25,
        "PHY FW",
        "Cable speed not enabled",
    )
    assert (link["speed_gbps"], link["amber_version"]) == (10, None)


def test_mlxlink_mft_4_22_layout() -> None:
    link = rdma_parse.parse_mlxlink(MLXLINK_MFT_4_22)
    assert (link["physical_state"], link["speed_gbps"], link["mft_version"]) == (
        "ETH_AN_FSM_ENABLE",
        100,
        "4.22.1-520",
    )
    assert link["enabled_link_speed"]["mask"] == 0x7F2


def test_mlxlink_ansi_colours_are_dropped() -> None:
    coloured = MLXLINK_OPCODE_25.replace("Cable speed not enabled", "\x1b[31mCable speed not enabled\x1b[0m")
    assert rdma_parse.parse_mlxlink(coloured)["recommendation"] == "Cable speed not enabled"


def test_ibstatus_down_port() -> None:
    down, up = rdma_parse.parse_ibstatus(IBSTATUS_DOWN)
    assert (down["state"], down["state_code"], down["phys_state"], down["rate_gbps"]) == (
        "DOWN",
        1,
        "Disabled",
        40,
    )
    assert (up["state"], up["rate"], up["speed"]) == ("ACTIVE", "100 Gb/sec (4X EDR)", "EDR")


# ------------------------------------------------------------------ mlxconfig

# The device block both mstconfig captures below begin with (the same card).
CX6DX_DEVICE = (
    "\n"
    "Device #1:\n"
    "----------\n"
    "\n"
    "Device type:        ConnectX6DX         \n"
    "Name:               MCX623432AN-ADA_Ax  \n"
    "Description:        ConnectX-6 Dx EN adapter card; 25GbE for OCP 3.0; with host management; "
    "Dual-port SFP28; PCIe 3.0/4.0 x16\n"
    "Device:             4b:00.0             \n"
    "\n"
)

# Search-index id 30996631291 (RoCE notes, `mstconfig -d 4b:00.0 q` on a ConnectX-6 Dx, the
# mstflint build of mlxconfig): its header and first ten rows, trailing padding as printed.
MLXCONFIG_QUERY_CX6DX = (
    CX6DX_DEVICE + "Configurations:                                     Next Boot\n"
    "        MEMIC_BAR_SIZE                              0                   \n"
    "        MEMIC_SIZE_LIMIT                            _256KB(1)           \n"
    "        HOST_CHAINING_MODE                          DISABLED(0)         \n"
    "        HOST_CHAINING_CACHE_DISABLE                 False(0)            \n"
    "        HOST_CHAINING_DESCRIPTORS                   Array[0..7]         \n"
    "        HOST_CHAINING_TOTAL_BUFFER_SIZE             Array[0..7]         \n"
    "        FLEX_PARSER_PROFILE_ENABLE                  0                   \n"
    "        PROG_PARSE_GRAPH                            False(0)            \n"
    "        FLEX_IPV4_OVER_VXLAN_PORT                   0                   \n"
    "        ROCE_NEXT_PROTOCOL                          254                 \n"
)

# Same source: `mstconfig -d 4b:00.0 set ROCE_CONTROL=ROCE_DISABLE`, answered y.
MLXCONFIG_SET_CX6DX = (
    CX6DX_DEVICE + "Configurations:                                     Next Boot       New\n"
    "        ROCE_CONTROL                                ROCE_ENABLE(2)       ROCE_DISABLE(1)     \n"
    "\n"
    " Apply new Configuration? (y/n) [n] : y\n"
    "Applying... Done!\n"
    "-I- Please reboot machine to load new configurations.\n"
)

# Search-index id 39536500675 (lab notes): `mstconfig -d 4b:00.0 set LINK_TYPE_P1=1` on a
# ConnectX-5 VPI, Ethernet to InfiniBand (padding trimmed by the author).
MLXCONFIG_SET_LINK_TYPE = (
    "\n"
    "Device #1:\n"
    "----------\n"
    "\n"
    "Device type:        ConnectX5\n"
    "Name:               MCX555A-ECA_Ax_Bx\n"
    "Description:        ConnectX-5 VPI adapter card; EDR IB (100Gb/s) and 100GbE; single-port QSFP28; "
    "PCIe3.0 x16; tall bracket; ROHS R6\n"
    "Device:             4b:00.0\n"
    "\n"
    "Configurations:                                     Next Boot       New\n"
    "        LINK_TYPE_P1                                ETH(2)               IB(1)\n"
    "\n"
    " Apply new Configuration? (y/n) [n] : y\n"
    "Applying... Done!\n"
    "-I- Please reboot machine to load new configurations.\n"
)

# Search-index id 20445052581: `mlxconfig -d /dev/mst/mt4103_pci_cr0 query` on a ConnectX-3 Pro
# (older MFT: 16-column header, no Name line), first four rows.
MLXCONFIG_QUERY_CX3 = (
    "Device #1:\n"
    "----------\n"
    "\n"
    "Device type:    ConnectX3Pro    \n"
    "Device:         /dev/mst/mt4103_pci_cr0\n"
    "\n"
    "Configurations:                                      Next Boot\n"
    "         SRIOV_EN                                    True(1)         \n"
    "         NUM_OF_VFS                                  16              \n"
    "         WOL_MAGIC_EN_P2                             True(1)         \n"
    "         LINK_TYPE_P1                                ETH(2)          \n"
)

# Search-index id 34266072972: `mlxconfig -d /dev/mst/mt4115_pciconf0 query` (ConnectX-4), an
# older mlxconfig that prints no column names.
MLXCONFIG_QUERY_NO_COLUMNS = (
    "Device #1:\n"
    "----------\n"
    "\n"
    "Device type:        ConnectX4\n"
    "Name:               00KH925_Ax\n"
    "Description:        Mellanox ConnectX-4 EDR IB VPI Single-port x16 PCIe 3.0 HCA\n"
    "Device:             /dev/mst/mt4115_pciconf0\n"
    "\n"
    "Configurations:\n"
    "        LINK_TYPE_P1                                ETH(2)\n"
    "        SRIOV_EN                                    True(1)\n"
    "        NUM_OF_VFS                                  8\n"
)

# Search-index id 57502744201 (a Go test quoting a ConnectX-4 Lx query): a parameter the device lacks.
MLXCONFIG_UNSUPPORTED = (
    "Device #1:\n----------\nDevice type:    ConnectX4Lx\n"
    "Description:    ConnectX-4 Lx EN LOM; 25GbE dual-port BP; PCIe3.0 x8\nName:           MCX4121A-XCAT\n\n"
    "Configurations:                                         Next Boot\n"
    "-E- The Device doesn't support INTERNAL_CPU_OFFLOAD_ENGINE parameter\n"
)


def test_mlxconfig_query_cx6dx() -> None:
    (device,) = rdma_parse.parse_mlxconfig_query(MLXCONFIG_QUERY_CX6DX)
    assert (device["index"], device["device_type"], device["name"], device["device"]) == (
        1,
        "ConnectX6DX",
        "MCX623432AN-ADA_Ax",
        "4b:00.0",
    )
    assert device["description"].endswith("PCIe 3.0/4.0 x16")
    assert device["columns"] == ["next_boot"]
    assert len(device["params"]) == 10
    assert device["params"]["MEMIC_SIZE_LIMIT"] == {"next_boot": "_256KB(1)"}
    assert rdma_parse.mlxconfig_value(device["params"]["ROCE_NEXT_PROTOCOL"]["next_boot"]) == ("254", 254)
    assert rdma_parse.mlxconfig_value(device["params"]["HOST_CHAINING_DESCRIPTORS"]["next_boot"]) == (
        "Array[0..7]",
        None,
    )


def test_mlxconfig_query_older_layouts() -> None:
    (cx3,) = rdma_parse.parse_mlxconfig_query(MLXCONFIG_QUERY_CX3)
    assert (cx3["device_type"], cx3["name"], cx3["device"]) == (
        "ConnectX3Pro",
        None,
        "/dev/mst/mt4103_pci_cr0",
    )
    assert rdma_parse.mlxconfig_value(cx3["params"]["LINK_TYPE_P1"]["next_boot"]) == ("ETH", 2)
    (cx4,) = rdma_parse.parse_mlxconfig_query(MLXCONFIG_QUERY_NO_COLUMNS)
    assert cx4["columns"] == ["next_boot"]
    assert cx4["params"]["NUM_OF_VFS"] == {"next_boot": "8"}


def test_mlxconfig_set() -> None:
    result = rdma_parse.parse_mlxconfig_set(MLXCONFIG_SET_CX6DX)
    assert (result["answer"], result["applied"], result["reboot_required"]) == ("y", True, True)
    assert result["devices"][0]["params"] == {
        "ROCE_CONTROL": {"next_boot": "ROCE_ENABLE(2)", "new": "ROCE_DISABLE(1)"}
    }
    link = rdma_parse.parse_mlxconfig_set(MLXCONFIG_SET_LINK_TYPE)
    assert link["devices"][0]["params"]["LINK_TYPE_P1"] == {"next_boot": "ETH(2)", "new": "IB(1)"}
    assert link["devices"][0]["device_type"] == "ConnectX5"


def test_mlxconfig_error_line_is_a_parse_error() -> None:
    with pytest.raises(rdma_parse.ParseError, match="doesn't support INTERNAL_CPU_OFFLOAD_ENGINE"):
        rdma_parse.parse_mlxconfig_query(MLXCONFIG_UNSUPPORTED)


def test_mlxconfig_query_is_not_a_set() -> None:
    with pytest.raises(rdma_parse.ParseError, match="New"):
        rdma_parse.parse_mlxconfig_set(MLXCONFIG_QUERY_CX6DX)
    # a set's table reads as a query with both columns
    assert rdma_parse.parse_mlxconfig_query(MLXCONFIG_SET_CX6DX)[0]["columns"] == ["next_boot", "new"]


# ------------------------------------------------------------------ small formats


def test_ibdev2netdev_verbose_and_empty() -> None:
    line = "0000:15:00.0 mlx5_0 (MT4131 - NA)  fw 40.44.1036 port 1 (DOWN  ) ==> ens21np0 (Down)"
    (entry,) = rdma_parse.parse_ibdev2netdev(line + "\n")
    assert entry == {
        "ibdev": "mlx5_0",
        "port": 1,
        "netdev": "ens21np0",
        "pci_bus_id": "0000:15:00.0",
        "hca_type": "MT4131",
        "part_number": None,
        "description": None,
        "fw_version": "40.44.1036",
        "port_state": "DOWN",
        "up": False,
    }
    assert rdma_parse.parse_ibdev2netdev("") == []  # no Mellanox netdevs: the tool prints nothing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("400 Gb/sec (4X NDR)", {"rate_gbps": 400, "width": 4, "speed": "NDR"}),
        ("800 Gb/sec (8X NDR)", {"rate_gbps": 800, "width": 8, "speed": "NDR"}),
        ("2.5 Gb/sec (1X SDR)", {"rate_gbps": 2.5, "width": 1, "speed": "SDR"}),
        ("56 Gb/sec (4X FDR)", {"rate_gbps": 56, "width": 4, "speed": "FDR"}),
        ("10 Gb/sec (4X)", {"rate_gbps": 10, "width": 4, "speed": "SDR"}),  # kernels before HDR naming
    ],
)
def test_ib_rate(text: str, expected: dict[str, Any]) -> None:
    assert rdma_parse.parse_ib_rate(text) == expected


def test_cma_roce_mode_and_kernel_mode_names() -> None:
    assert rdma_parse.parse_cma_roce_mode("RoCE v2\n") == "v2"
    assert rdma_parse.parse_cma_roce_mode("IB/RoCE v1\n") == "v1"
    assert (rdma_parse.roce_mode_name("RoCE v2\n"), rdma_parse.roce_mode_name("IB/RoCE v1")) == ("v2", "v1")


# ------------------------------------------------------------------ malformed input


@pytest.mark.parametrize(
    ("parser", "text", "tool"),
    [
        (rdma_parse.parse_ibdev2netdev, "mlx5_0 port 1 ==> ens21np0 (U", "ibdev2netdev"),
        (rdma_parse.parse_ibdev2netdev, "mlx5_0 port one ==> ens21np0 (Up)\n", "ibdev2netdev"),
        (rdma_parse.parse_mlnx_qos, "", "mlnx_qos"),
        (
            rdma_parse.parse_mlnx_qos,
            "Interface name is required\nUsage: mlnx_qos -i <interface> [options]\n",
            "mlnx_qos",
        ),
        (rdma_parse.parse_mlnx_qos, "Priority trust state is not supported on your system\n", "mlnx_qos"),
        (
            rdma_parse.parse_mlnx_qos,
            "PFC configuration:\n\tpriority    0   1   2   3   4   5   6   7\n",
            "mlnx_qos",
        ),
        (rdma_parse.parse_mlnx_qos, QOS_OLDEST.replace("0 0 0 1 0 0 0 0", "0 0 0 1 0 0 0"), "mlnx_qos"),
        (rdma_parse.parse_mlnx_qos, QOS_OLDEST.replace("0 0 0 1 0 0 0 0", "0 0 0 2 0 0 0 0"), "mlnx_qos"),
        (rdma_parse.parse_mlnx_qos, QOS_OLDEST + "tc: 0 ratelimit: unlimited, tsa: foo\n", "mlnx_qos"),
        (rdma_parse.parse_mlnx_qos, QOS_NETARBITER.replace("prio:7 dscp:63", "prio:7 dscp:07"), "mlnx_qos"),
        (rdma_parse.parse_mlxlink, "\n", "mlxlink"),
        (
            rdma_parse.parse_mlxlink,
            '-E- Failed to open device: "mlx5_9", No such file or directory\n',
            "mlxlink",
        ),
        (rdma_parse.parse_mlxlink, MLXLINK_ETH_100G.replace("Operational Info", "Operational"), "mlxlink"),
        (rdma_parse.parse_mlxlink, MLXLINK_ETH_100G.replace("0x00000200 (100G_4X)", "0x00000200"), "mlxlink"),
        (rdma_parse.parse_mlxconfig_query, "-E- Failed to open the device\n", "mlxconfig"),
        (
            rdma_parse.parse_mlxconfig_query,
            "        ROCE_CONTROL                                ROCE_ENABLE(2)\n",
            "mlxconfig",
        ),
        (rdma_parse.parse_mlxconfig_query, MLXCONFIG_QUERY_CX6DX.split("Configurations")[0], "mlxconfig"),
        (rdma_parse.parse_mlxconfig_query, MLXCONFIG_QUERY_CX6DX[:-30], "mlxconfig"),
        (
            rdma_parse.parse_mlxconfig_set,
            MLXCONFIG_SET_CX6DX.replace("ROCE_DISABLE(1)     ", ""),
            "mlxconfig",
        ),
        (rdma_parse.parse_ibstat, "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n", "ibstat"),
        (rdma_parse.parse_ibstat, "ibstat: command not found\n", "ibstat"),
        (
            rdma_parse.parse_ibstatus,
            IBSTATUS_DOWN.replace("rate:            40 Gb/sec (4X QDR)", "rate: 40"),
            "ibstatus",
        ),
        (rdma_parse.parse_ibstatus, "Infiniband device 'mlx5_0' port 1 status:\n", "ibstatus"),
        (rdma_parse.parse_show_gids, "n_gids_found=0\n", "show_gids"),
        (rdma_parse.parse_ethtool_info, "Cannot get driver information: No such device\n", "ethtool -i"),
        (rdma_parse.parse_ethtool_info, "version: 23.10\n", "ethtool -i"),
        (
            rdma_parse.parse_cma_roce_mode,
            "Module rdma_cm is not loaded or does not support configfs\n",
            "cma_roce_mode",
        ),
        (rdma_parse.parse_cma_roce_mode, "", "cma_roce_mode"),
        (rdma_parse.parse_ib_rate, "400 Gbps", "ib rate"),
        (rdma_parse.roce_mode_name, "RoCE v3", "roce mode"),
    ],
)
def test_malformed_input_is_a_parse_error_naming_the_tool(
    parser: Callable[[str], Any], text: str, tool: str
) -> None:
    with pytest.raises(rdma_parse.ParseError) as excinfo:
        parser(text)
    assert str(excinfo.value).startswith(tool)


@pytest.mark.parametrize(
    "parser",
    [
        rdma_parse.parse_ibdev2netdev,
        rdma_parse.parse_mlnx_qos,
        rdma_parse.parse_mlxlink,
        rdma_parse.parse_mlxconfig_query,
        rdma_parse.parse_ibstat,
    ],
)
def test_non_text_is_a_parse_error(parser: Callable[[Any], Any]) -> None:
    with pytest.raises(rdma_parse.ParseError):
        parser(None)


def test_show_gids_count_mismatch() -> None:
    text = _read("openshift-nvidiatools-show_gids-mlx5_3-net1.txt")
    with pytest.raises(rdma_parse.ParseError, match="n_gids_found=5"):
        rdma_parse.parse_show_gids(text.replace("n_gids_found=4", "n_gids_found=5"))


# ------------------------------------------------------------------ sysfs readers


def _put(root: Path, relative: str, value: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value + "\n", encoding="utf-8")


@pytest.fixture
def sysroot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small fake tree in the kernel's formats; readers' default root points at it."""
    pci = "sys/devices/pci0000:10/0000:10:01.0/0000:15:00.0"
    _put(tmp_path, f"{pci}/numa_node", "1")
    ib = f"{pci}/infiniband/mlx5_0"
    net = f"{pci}/net/ens21np0"
    for rel, value in {
        f"{ib}/fw_ver": "40.44.1036",
        f"{ib}/node_guid": "b83f:d203:00a1:b2c4",
        f"{ib}/hca_type": "MT4131",
        f"{ib}/ports/1/state": "4: ACTIVE",
        f"{ib}/ports/1/phys_state": "5: LinkUp",
        f"{ib}/ports/1/rate": "400 Gb/sec (4X NDR)",
        f"{ib}/ports/1/link_layer": "Ethernet",
        f"{ib}/ports/1/gid_attrs/ndevs/0": "ens21np0",
        f"{ib}/tc/1/traffic_class": "Global tclass=106",
        f"{net}/mtu": "4200",
        f"{net}/operstate": "up",
        f"{net}/speed": "400000",
        f"{net}/carrier": "1",
        f"{net}/address": "b8:3f:d2:a1:b2:c4",
        f"{net}/ecn/roce_np/cnp_dscp": "48",
        "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode": "RoCE v2",
        "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos": "106",
    }.items():
        _put(tmp_path, rel, value)
    for prio in range(8):
        _put(tmp_path, f"{net}/ecn/roce_np/enable/{prio}", "1" if prio == 3 else "0")
        _put(tmp_path, f"{net}/ecn/roce_rp/enable/{prio}", "1" if prio in (3, 5) else "0")
    for link, target in (
        (f"{ib}/device", pci),
        (f"{net}/device", pci),
        ("sys/class/infiniband/mlx5_0", ib),
        ("sys/class/net/ens21np0", net),
    ):
        path = tmp_path / link
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(os.path.relpath(tmp_path / target, path.parent))
    for name in ("mlx5_10", "mlx5_2", "mlx5_1"):
        (tmp_path / "sys/class/infiniband" / name).mkdir()
    monkeypatch.setattr(rdma_read, "SYSFS_ROOT", str(tmp_path))
    return tmp_path


def test_read_ecn(sysroot: Path) -> None:
    ecn = rdma_read.read_ecn("ens21np0")
    assert ecn["np"] == [p == 3 for p in range(8)]
    assert ecn["rp"] == [p in (3, 5) for p in range(8)]
    assert ecn["cnp_dscp"] == 48
    assert rdma_read.read_ecn("eth9") == {"np": None, "rp": None, "cnp_dscp": None}


def test_read_ib_port_and_device(sysroot: Path) -> None:
    port = rdma_read.read_ib_port("mlx5_0", 1)
    assert (port["state"], port["state_code"], port["phys_state"], port["phys_state_code"]) == (
        "ACTIVE",
        4,
        "LinkUp",
        5,
    )
    assert (port["rate"], port["rate_gbps"], port["width"], port["speed"]) == (
        "400 Gb/sec (4X NDR)",
        400,
        4,
        "NDR",
    )
    assert (port["link_layer"], port["netdev"]) == ("Ethernet", "ens21np0")
    device = rdma_read.read_ib_device("mlx5_0")
    assert device == {
        "fw_version": "40.44.1036",
        "node_guid": "b83f:d203:00a1:b2c4",
        "hca_type": "MT4131",
        "pci_bus_id": "0000:15:00.0",
        "numa_node": 1,
    }
    assert rdma_read.ib_ports("mlx5_0") == [1]


def test_read_netdev_up_and_down(sysroot: Path) -> None:
    assert rdma_read.read_netdev("ens21np0") == {
        "mtu": 4200,
        "operstate": "up",
        "speed_mbps": 400000,
        "carrier": True,
        "address": "b8:3f:d2:a1:b2:c4",
    }
    net = "sys/class/net/ens21np0"
    _put(sysroot, f"{net}/speed", "-1")  # SPEED_UNKNOWN while there is no carrier
    _put(sysroot, f"{net}/carrier", "0")
    assert (
        rdma_read.read_netdev("ens21np0")["speed_mbps"],
        rdma_read.read_netdev("ens21np0")["carrier"],
    ) == (
        None,
        False,
    )


def test_read_rdma_cm_defaults_and_traffic_class(sysroot: Path) -> None:
    assert (rdma_read.read_roce_mode("mlx5_0", 1), rdma_read.read_roce_tos("mlx5_0", 1)) == ("v2", 106)
    assert rdma_read.read_traffic_class("mlx5_0", 1) == 106
    cm = "sys/kernel/config/rdma_cm/mlx5_0/ports/1"
    _put(sysroot, f"{cm}/default_roce_mode", "IB/RoCE v1")
    assert rdma_read.read_roce_mode("mlx5_0", 1) == "v1"
    assert rdma_read.read_roce_mode("mlx5_9", 1) is None  # no configfs group made for that device
    _put(sysroot, "sys/class/infiniband/mlx5_0/tc/1/traffic_class", "")
    assert rdma_read.read_traffic_class("mlx5_0", 1) is None  # MLNX_OFED prints nothing until one is set


def test_list_ib_devices_in_ls_order(sysroot: Path, tmp_path: Path) -> None:
    assert rdma_read.list_ib_devices() == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_2"]
    assert rdma_read.list_ib_devices(str(tmp_path / "elsewhere")) == []


@pytest.mark.parametrize(
    ("relative", "value", "reader"),
    [
        ("sys/class/net/ens21np0/ecn/roce_np/enable/3", "on", lambda: rdma_read.read_ecn("ens21np0")),
        ("sys/class/net/ens21np0/ecn/roce_rp/enable/7", "2", lambda: rdma_read.read_ecn("ens21np0")),
        ("sys/class/net/ens21np0/mtu", "big", lambda: rdma_read.read_netdev("ens21np0")),
        ("sys/class/infiniband/mlx5_0/ports/1/state", "ACTIVE", lambda: rdma_read.read_ib_port("mlx5_0", 1)),
        ("sys/class/infiniband/mlx5_0/ports/1/rate", "400", lambda: rdma_read.read_ib_port("mlx5_0", 1)),
        (
            "sys/class/infiniband/mlx5_0/tc/1/traffic_class",
            "tclass 106",
            lambda: rdma_read.read_traffic_class("mlx5_0", 1),
        ),
        (
            "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode",
            "v2",
            lambda: rdma_read.read_roce_mode("mlx5_0", 1),
        ),
    ],
)
def test_sysfs_file_not_in_kernel_format(
    sysroot: Path, relative: str, value: str, reader: Callable[[], Any]
) -> None:
    _put(sysroot, relative, value)
    with pytest.raises(rdma_parse.ParseError):
        reader()


# ------------------------------------------------------------------ damaged output (issue 24)


def test_a_2_mib_ibdev2netdev_line_is_refused_at_once_quoting_little() -> None:
    """The -v regex backtracked over every split of a long word (a 2 MiB line ran for minutes)."""
    for text in ("x" * (2 << 20), ("y" * 1000 + "\n") * 2000, "a (b - c) " * 100 + "\n"):
        started = time.monotonic()
        with pytest.raises(rdma_parse.ParseError, match=r"^ibdev2netdev: ") as caught:
            rdma_parse.parse_ibdev2netdev(text)
        assert time.monotonic() - started < 1.0
        assert len(str(caught.value)) < 300


VERBOSE = "0000:15:00.0 mlx5_0 (MT4131 - NA)  fw 40.44.1036 port 1 (DOWN  ) ==> ens21np0 (Down)\n"


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        # the capture cut inside its last value: 'Ethernet' read as 'Ether'
        (
            rdma_parse.parse_ibstat,
            "gpud-ibstat.47.0.a100.all.active.0.txt",
            "link layer 'Ether' is not one of",
        ),
        (rdma_parse.parse_ibstatus, "gpud-ibstatus.39.0.a100.all.active.0.txt", "link layer 'Infini' is not"),
        (rdma_parse.parse_ibstat, "gpud-ibstat.47.0.a100.all.active.0.txt", "firmware version '2' is not"),
        (
            rdma_parse.parse_ethtool_info,
            "3fs-doc-ethtool-i-ens4np0-cx7.txt",
            "firmware version '28.39' is not",
        ),
        (rdma_parse.parse_ibdev2netdev, VERBOSE, "firmware version '4' is not"),
    ],
)
def test_values_cut_short_are_refused(parse: Callable[[str], Any], text: str, message: str) -> None:
    original = text if text == VERBOSE else _read(text)
    parse(original)
    cut = {
        "link layer 'Ether'": lambda t: t.replace("Link layer: Ethernet", "Link layer: Ether", 1),
        "link layer 'Infini'": lambda t: t.replace(
            "link_layer:      InfiniBand", "link_layer:      Infini", 1
        ),
        "firmware version '2'": lambda t: t.replace("Firmware version: 22.35.2302", "Firmware version: 2", 1),
        "firmware version '28.39'": lambda t: t.replace("28.39.3560", "28.39", 1),
        "firmware version '4'": lambda t: t.replace("fw 40.44.1036", "fw 4", 1),
    }[message.split(" is")[0]](original)
    assert cut != original
    with pytest.raises(rdma_parse.ParseError, match=message):
        parse(cut)


# ------------------------------------------------------------------ cut and underscored values (issue 36)

GCE_MLXLINK = "gce-bugreport-mlxlink-gpu-nvlink-XDR-netir.txt"
ETHTOOL_I = "3fs-doc-ethtool-i-ens4np0-cx7.txt"


@pytest.mark.parametrize(
    ("name", "end", "message"),
    [
        # the output stops inside a value, as a dropped SSH session leaves it
        (GCE_MLXLINK, "No iss", "does not end with a newline"),
        (GCE_MLXLINK, "36.2014.", "does not end with a newline"),
        (ETHTOOL_I, "0000:e6:00", "does not end with a newline"),
        (ETHTOOL_I, "supports-statistics: y", "does not end with a newline"),
    ],
)
def test_output_cut_inside_a_value_is_refused(name: str, end: str, message: str) -> None:
    text = _read(name)
    parser, _ = CAPTURES[name]
    cut = text[: text.index(end) + len(end)]
    with pytest.raises(rdma_parse.ParseError, match=message):
        parser(cut)


@pytest.mark.parametrize(
    ("name", "whole", "cut", "message"),
    [
        # the value cut, the line still ended (a writer that flushes whole lines)
        (GCE_MLXLINK, "36.2014.1676", "36.2014.", r"^mlxlink: firmware version '36.2014.' is not"),
        (ETHTOOL_I, "0000:e6:00.0", "0000:e6:00", r"^ethtool -i: bus-info '0000:e6:00' is not a PCI address"),
        (GCE_MLXLINK, "Width                              : 2x", "Width : 2", r"^mlxlink: width '2' is not"),
    ],
)
def test_a_value_cut_on_its_own_line_is_refused(name: str, whole: str, cut: str, message: str) -> None:
    text = _read(name)
    parser, _ = CAPTURES[name]
    assert whole in text
    with pytest.raises(rdma_parse.ParseError, match=message):
        parser(text.replace(whole, cut, 1))


@pytest.mark.parametrize(
    ("name", "number", "damaged", "message"),
    [
        # int() and float() read '3_0' as 30 and '4_00' as 400
        (
            "openshift-nvidiatools-show_gids-mlx5_3-net1.txt",
            "\t1\t3\t",
            "\t1\t3_0\t",
            "index '3_0' is not a whole",
        ),
        (
            "openshift-nvidiatools-show_gids-mlx5_3-net1.txt",
            "\t1\t3\t",
            "\t1_0\t3\t",
            "port '1_0' is not a whole",
        ),
        ("rdma-notes-show_gids-mlx5_bond_0.txt", "n_gids_found=4", "n_gids_found=4_0", "n_gids_found '4_0'"),
        ("gpud-ibstat.47.0.h100.all.active.0.txt", "Rate: 400", "Rate: 4_00", "Rate '4_00' is not a number"),
        ("gpud-ibstat.47.0.h100.all.active.0.txt", "Rate: 400", "Rate: 4e2", "Rate '4e2' is not a number"),
        ("gpud-ibstat.47.0.h100.all.active.0.txt", "Base lid: 0", "Base lid: 0_0", "Base lid '0_0' is not"),
        ("gpud-ibstat.47.0.h100.all.active.0.txt", "Number of ports: 1", "Number of ports: +1", "'\\+1'"),
        ("azhpc-diag-ibstatus-ndv4.txt", "0x96", "0x9_6", "base lid '0x9_6' is not a hexadecimal"),
        (
            "3fs-doc-mlnx_qos-ens4np0-cx7-ofed23.10.txt",
            "Cable len: 30",
            "Cable len: 3_0",
            "cable length '3_0'",
        ),
        ("3fs-doc-mlnx_qos-ens4np0-cx7-ofed23.10.txt", "19872,", "19_872,", "receive buffer size '19_872'"),
        (GCE_MLXLINK, "Status Opcode                      : 0", "Status Opcode : 0_0", "status opcode '0_0'"),
    ],
)
def test_a_number_no_tool_prints_is_refused_not_read_as_another(
    name: str, number: str, damaged: str, message: str
) -> None:
    text = _read(name)
    parser, _ = CAPTURES[name]
    assert number in text
    with pytest.raises(rdma_parse.ParseError, match=message) as caught:
        parser(text.replace(number, damaged, 1))
    assert str(caught.value).startswith(TOOLS[name])


TOOLS = {
    "openshift-nvidiatools-show_gids-mlx5_3-net1.txt": "show_gids: ",
    "rdma-notes-show_gids-mlx5_bond_0.txt": "show_gids: ",
    "gpud-ibstat.47.0.h100.all.active.0.txt": "ibstat: ",
    "azhpc-diag-ibstatus-ndv4.txt": "ibstatus: ",
    "3fs-doc-mlnx_qos-ens4np0-cx7-ofed23.10.txt": "mlnx_qos: ",
    GCE_MLXLINK: "mlxlink: ",
}


def test_a_sysfs_number_with_an_underscore_is_refused(sysroot: Path) -> None:
    _put(sysroot, "sys/class/net/ens21np0/mtu", "9_000")
    with pytest.raises(rdma_parse.ParseError, match=r"holds '9_000', not a number"):
        rdma_read.read_netdev("ens21np0")
    _put(sysroot, "sys/class/net/ens21np0/mtu", "9000")
    assert rdma_read.read_netdev("ens21np0")["mtu"] == 9000
