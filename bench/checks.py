"""The checks `gpufleet drift` makes, written the way a fleet script would: one shell snippet per
setting, each printing ``DRIFT <setting>[<where>] <from> -> <to>`` for what differs.

The naive playbook runs one snippet per task; the clush baseline runs them all in one ssh
command. Both probe with the same tools gpufleet's node_facts module runs (nvidia-smi,
mlnx_qos, mlxconfig, ethtool, systemctl, sysfs/configfs reads), against the same desired state
(the roles' defaults and the reference deployment), so the three do the same work on the node.
"""

from __future__ import annotations

# Loops over the node's RDMA devices and their netdevs, as ibdev2netdev would list them.
_EACH_DEV = "for d in /sys/class/infiniband/*; do dev=${d##*/}; netdev=$(ls $d/device/net); "
_EACH_NETDEV = "for n in /sys/class/infiniband/*/device/net/*; do netdev=${n##*/}; "
_DRIFT = 'echo "DRIFT %s[$%s] $v -> %s"'

CHECKS: dict[str, str] = {
    "link_type": _EACH_DEV
    + "v=$(mlxconfig -d $(basename $(readlink -f $d/device)) q LINK_TYPE_P1 | "
    + "awk '/LINK_TYPE_P1/{print $2}'); "
    + '[ "$v" = "ETH(2)" ] || '
    + _DRIFT % ("link_type", "dev", "ETH(2)")
    + "; done",
    "roce_mode": _EACH_DEV
    + "v=$(cat /sys/kernel/config/rdma_cm/$dev/ports/1/default_roce_mode); "
    + '[ "$v" = "RoCE v2" ] || '
    + _DRIFT % ("roce_mode", "dev", "RoCE v2")
    + "; done",
    "roce_tos": _EACH_DEV
    + "v=$(cat /sys/kernel/config/rdma_cm/$dev/ports/1/default_roce_tos); "
    + '[ "$v" = 106 ] || '
    + _DRIFT % ("roce_tos", "dev", "106")
    + "; done",
    "mtu": _EACH_NETDEV
    + 'v=$(cat /sys/class/net/$netdev/mtu); [ "$v" = 4200 ] || '
    + _DRIFT % ("mtu", "netdev", "4200")
    + "; done",
    "link_state": _EACH_DEV
    + "v=$(cut -d' ' -f2 $d/ports/1/state)/$(cut -d' ' -f1 $d/ports/1/rate); "
    + '[ "${v%/*}" = ACTIVE ] && [ "${v#*/}" -ge 400 ] || '
    + _DRIFT % ("link_state", "dev", "ACTIVE/400")
    + "; done",
    "trust": _EACH_NETDEV
    + "v=$(mlnx_qos -i $netdev | awk '/trust state/{print $NF}'); "
    + '[ "$v" = dscp ] || '
    + _DRIFT % ("trust", "netdev", "dscp")
    + "; done",
    "pfc": _EACH_NETDEV
    + "v=$(mlnx_qos -i $netdev | awk '$1==\"enabled\"{$1=\"\"; print}' | tr -d ' '); "
    + '[ "$v" = 00010000 ] || '
    + _DRIFT % ("pfc", "netdev", "00010000")
    + "; done",
    "ecn": _EACH_NETDEV
    + "v=; for p in 0 1 2 3 4 5 6 7; do v=$v$(cat /sys/class/net/$netdev/ecn/roce_np/enable/$p)"
    + "$(cat /sys/class/net/$netdev/ecn/roce_rp/enable/$p); done; "
    + '[ "$v" = 0000001100000000 ] || '
    + _DRIFT % ("ecn", "netdev", "0000001100000000")
    + "; done",
    "cnp_dscp": _EACH_NETDEV
    + "v=$(cat /sys/class/net/$netdev/ecn/roce_np/cnp_dscp); "
    + '[ "$v" = 48 ] || '
    + _DRIFT % ("cnp_dscp", "netdev", "48")
    + "; done",
    "global_pause": _EACH_NETDEV
    + "v=$(ethtool -a $netdev | awk '/^(RX|TX):/{printf $2}'); "
    + '[ "$v" = offoff ] || '
    + _DRIFT % ("global_pause", "netdev", "offoff")
    + "; done",
    "power_limit": "nvidia-smi --query-gpu=uuid,enforced.power.limit --format=csv,noheader | "
    + "while IFS=', ' read -r uuid v unit; do [ \"$v\" = 1400.00 ] || "
    + _DRIFT % ("power_limit", "uuid", "1400.00")
    + "; done",
    "persistence": "nvidia-smi -q -x | grep -c '<persistence_mode>Enabled' | "
    + 'while read -r v; do [ "$v" = 16 ] || echo "DRIFT persistence[gpus] $v -> 16"; done',
    "persistenced": "v=$(systemctl show nvidia-persistenced.service | "
    + "awk -F= '/^(ActiveState|UnitFileState)=/{printf $2}'); "
    + '[ "$v" = activeenabled ] || echo "DRIFT persistenced[unit] $v -> activeenabled"',
    "nccl_topology": "nvidia-smi --query-gpu=index,pci.bus_id,compute_cap --format=csv,noheader >/dev/null; "
    + "nvidia-smi topo -m >/dev/null; "
    + '[ -s /etc/nccl/topo.xml ] || echo "DRIFT nccl_topology[/etc/nccl/topo.xml] absent -> rendered"',
    "gpu_pinning": "uuids=$(nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader | "
    + "sort -t, -k3 | cut -d, -f2 | tr -d ' '); "
    + "for i in glm52 kimik3; do f=/etc/gpufleet/instances/$i.env; "
    + '[ -s $f ] && grep -q "$(echo $uuids | cut -d" " -f1)" $f || '
    + 'echo "DRIFT gpu_pinning[$i] absent -> pinned"; done',
}


def script() -> str:
    """Every check, in order, as one shell command (what clush runs)."""
    return "\n".join(CHECKS.values())


def naive_playbook(hosts: str = "gpu_nodes") -> str:
    """A playbook with one shell task per setting: the per-task pattern gpufleet avoids."""
    lines = [
        "---",
        "- name: Naive drift check, one task per setting",
        f"  hosts: {hosts}",
        "  gather_facts: false",
        "  tasks:",
    ]
    for name, command in CHECKS.items():
        lines += [
            f"    - name: Check {name}",
            "      ansible.builtin.shell:",
            "        executable: /bin/bash",
            "        cmd: |",
            f"          {command}",
            "      register: check",
            "      changed_when: \"'DRIFT' in check.stdout\"",
        ]
    return "\n".join(lines) + "\n"
