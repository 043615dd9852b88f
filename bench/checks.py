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


def _per_port(setting: str, loop: str, read: str, want: str, test: str = "") -> str:
    """For every port: v=<read>; print a DRIFT line unless <test> (default: v equals want)."""
    where = "dev" if loop == _EACH_DEV else "netdev"
    test = test or f'[ "$v" = "{want}" ]'
    return f"{loop}v=$({read}); {test} || {_DRIFT % (setting, where, want)}; done"


_CONFIGFS = "/sys/kernel/config/rdma_cm/$dev/ports/1"
_ECN = "/sys/class/net/$netdev/ecn"

CHECKS: dict[str, str] = {
    "link_type": _per_port(
        "link_type",
        _EACH_DEV,
        "mlxconfig -d $(basename $(readlink -f $d/device)) q LINK_TYPE_P1 | awk '/LINK_TYPE_P1/{print $2}'",
        "ETH(2)",
    ),
    "roce_mode": _per_port("roce_mode", _EACH_DEV, f"cat {_CONFIGFS}/default_roce_mode", "RoCE v2"),
    "roce_tos": _per_port("roce_tos", _EACH_DEV, f"cat {_CONFIGFS}/default_roce_tos", "106"),
    "mtu": _per_port("mtu", _EACH_NETDEV, "cat /sys/class/net/$netdev/mtu", "4200"),
    "link_state": _per_port(
        "link_state",
        _EACH_DEV,
        "echo $(cut -d' ' -f2 $d/ports/1/state)/$(cut -d' ' -f1 $d/ports/1/rate)",
        "ACTIVE/400",
        test='[ "${v%/*}" = ACTIVE ] && [ "${v#*/}" -ge 400 ]',
    ),
    "trust": _per_port("trust", _EACH_NETDEV, "mlnx_qos -i $netdev | awk '/trust state/{print $NF}'", "dscp"),
    "pfc": _per_port(
        "pfc",
        _EACH_NETDEV,
        "mlnx_qos -i $netdev | awk '$1==\"enabled\"{$1=\"\"; print}' | tr -d ' '",
        "00010000",
    ),
    "ecn": _per_port(
        "ecn",
        _EACH_NETDEV,
        f"for p in 0 1 2 3 4 5 6 7; do cat {_ECN}/roce_np/enable/$p {_ECN}/roce_rp/enable/$p; done"
        " | tr -d '\\n'",
        "0000001100000000",
    ),
    "cnp_dscp": _per_port("cnp_dscp", _EACH_NETDEV, f"cat {_ECN}/roce_np/cnp_dscp", "48"),
    "global_pause": _per_port(
        "global_pause", _EACH_NETDEV, "ethtool -a $netdev | awk '/^(RX|TX):/{printf $2}'", "offoff"
    ),
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
