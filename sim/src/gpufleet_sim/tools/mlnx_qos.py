"""Fake `mlnx_qos` (mlnx-tools python/mlnx_qos): show and set trust and PFC of a NIC's netdev.

Output is the MLNX_OFED 23.10 layout (tests/fixtures/real/mellanox/3fs-doc-mlnx_qos-*): DCBX
mode, trust, dscp2prio (dscp trust only), default priority, receive buffers, cable length,
PFC enabled/buffer rows, then the TCs in the order the tool walks its prio->tc map. The tool
indents with tabs; the capture shows them expanded to spaces by the terminal it was copied from.
Settings come from the node state (trust, pfc); ETS and buffers are the firmware defaults.
Like the real tool it parses options with optparse and prints its errors on stdout.
"""

from __future__ import annotations

import optparse
from pathlib import Path
from typing import Any

from gpufleet_sim.state import locked

# Firmware default ETS map: priority 0 rides TC1 and priority 1 TC0 (mlx5), all "vendor".
_PRIO_TC = [1, 0, 2, 3, 4, 5, 6, 7]
# Receive buffer split the firmware picks with one lossless buffer (simulated: CX-7 figures
# from the 3FS capture), and the single lossy buffer without PFC.
_BUFFERS_LOSSLESS = [19872, 220896, 0, 0, 0, 0, 0, 0]
_BUFFERS_LOSSY = [240768, 0, 0, 0, 0, 0, 0, 0]
_MAX_BUFFER = 4151520
_CABLE_LEN = 7
_NO_DEVICE = [  # what each step prints when netlink answers ENODEV for the interface
    "Priority trust state is not supported on your system",
    "Buffers commands are not supported on your system",
    "Rate limit is not supported on your system!",
    "ETS features are not supported on your system",
]
# Options the simulated node does not model: option dest -> the flag as typed.
_NOT_SIMULATED = {
    "prio_tc": "--prio_tc",
    "tsa": "--tsa",
    "tc_bw": "--tcbw",
    "ratelimit": "--ratelimit",
    "dcbx": "--dcbx",
    "dscp2prio": "--dscp2prio",
    "defltprio": "--defltprio",
    "cable_len": "--cable_len",
    "prio2buffer": "--prio2buffer",
    "buffer_size": "--buffer_size",
}


def _parser() -> optparse.OptionParser:
    parser = optparse.OptionParser(
        prog="mlnx_qos", usage="%prog -i <interface> [options]", version="%prog 1.2"
    )
    parser.add_option(
        "-f", "--pfc", dest="pfc", metavar="LIST", help="PFC per priority 0..7, e.g. 0,0,0,1,0,0,0,0"
    )
    parser.add_option("-p", "--prio_tc", dest="prio_tc", metavar="LIST", help="priority to TC map")
    parser.add_option("-s", "--tsa", dest="tsa", metavar="LIST", help="transmission algorithm per TC")
    parser.add_option("-t", "--tcbw", dest="tc_bw", metavar="LIST", help="ETS bandwidth per TC")
    parser.add_option("-r", "--ratelimit", dest="ratelimit", metavar="LIST", help="rate limit per TC (Gbps)")
    parser.add_option("-d", "--dcbx", dest="dcbx", help="dcbx mode: fw or os")
    parser.add_option("--trust", dest="trust", help="priority trust state: pcp or dscp")
    parser.add_option("--dscp2prio", dest="dscp2prio", action="append", help="set/del a dscp,prio mapping")
    parser.add_option("--defltprio", dest="defltprio", help="set/del the default priority")
    parser.add_option("--cable_len", dest="cable_len", help="cable length for buffer thresholds")
    parser.add_option("--prio2buffer", dest="prio2buffer", metavar="LIST", help="priority to buffer map")
    parser.add_option("--buffer_size", dest="buffer_size", metavar="LIST", help="receive buffer sizes")
    parser.add_option("-i", "--interface", dest="intf", help="Interface name")
    parser.add_option("-a", action="store_true", dest="printall", default=False, help="Show all TCs")
    return parser


def _parse_pfc(parser: optparse.OptionParser, text: str) -> list[int] | str:
    """8 flags, or the message the real tool prints before exiting 1."""
    values: list[int] = []
    for item in text.split(","):
        if len(values) >= 8:
            return "Too many items for PFC"
        try:
            value = int(item)
            if value < 0 or value > 1:
                raise ValueError(f"{value} is not in the range 0..1")
        except ValueError as exc:
            return f"Bad value for PFC: {exc}\n{parser.get_usage().rstrip()}"
        values.append(value)
    if len(values) != 8:
        return "pfc list must have 8 items"
    return values


def _dscp2prio() -> list[str]:
    # Default map, as the tool lists the firmware's app entries: highest DSCP first per priority.
    return [
        f"\tprio:{p} dscp:" + "".join(f"{d:02d}," for d in range(8 * p + 7, 8 * p - 1, -1)) for p in range(8)
    ]


def render(nic: dict[str, Any]) -> str:
    pfc = [int(v) for v in nic["pfc"]]
    lossless = any(pfc)
    buffers = _BUFFERS_LOSSLESS if lossless else _BUFFERS_LOSSY
    lines = ["DCBX mode: OS controlled", "Priority trust state: " + nic["trust"]]
    if nic["trust"] == "dscp":
        lines += ["dscp2prio mapping:", *_dscp2prio()]
    lines.append("default priority:")
    lines.append(
        "Receive buffer size (bytes): " + "".join(f"{b}," for b in buffers) + f"max_buffer_size={_MAX_BUFFER}"
    )
    lines.append(f"Cable len: {_CABLE_LEN}")
    lines.append("PFC configuration:")
    lines.append("\tpriority    0   1   2   3   4   5   6   7")
    lines.append("\tenabled     " + "".join(f"{v:1d}   " for v in pfc))
    lines.append("\tbuffer      " + "".join(f"{1 if v else 0:1d}   " for v in pfc))
    tc2up: dict[int, list[int]] = {}
    for up, tc in enumerate(_PRIO_TC):
        tc2up.setdefault(tc, []).append(up)
    for tc, ups in tc2up.items():
        lines.append(f"tc: {tc} ratelimit: unlimited, tsa: vendor")
        lines += [f"\t priority:  {up}" for up in ups]
    return "\n".join(lines) + "\n"


def main(argv: list[str], node_dir: Path) -> int:
    parser = _parser()
    try:
        options, args = parser.parse_args(argv)
    except SystemExit as exc:  # optparse already printed usage/version/error
        return int(exc.code or 0)
    if args:
        print("Bad arguments")
        parser.print_usage()
        return 1
    if options.intf is None:
        print("Interface name is required")
        parser.print_usage()
        return 1
    unsupported = [flag for dest, flag in _NOT_SIMULATED.items() if getattr(options, dest) is not None]
    if unsupported:
        print(f"mlnx_qos: {unsupported[0]} is not supported by this node's mlnx_qos")
        return 1
    pfc = _parse_pfc(parser, options.pfc) if options.pfc else None
    if isinstance(pfc, str):
        print(pfc)
        return 1
    with locked(node_dir) as state:
        nic = next((n for n in state["nics"] if n["netdev"] == options.intf), None)
        if nic is None:
            return _no_device(options, pfc)
        if options.trust and options.trust not in ("dscp", "pcp"):
            print("Invalid trust state command. Refer to the help.")
            return 1
        if pfc is not None:
            nic["pfc"] = pfc
        if options.trust:
            nic["trust"] = options.trust
        print(render(nic), end="")
    return 0


def _no_device(options: optparse.Values, pfc: list[int] | None) -> int:
    """An interface the kernel does not know: every netlink request fails with ENODEV."""
    if pfc is not None:
        print("Netlink error: No such device (19)")
        return 1
    if options.trust and options.trust not in ("dscp", "pcp"):
        print("Invalid trust state command. Refer to the help.")
        return 1
    print(_NO_DEVICE[0])
    if options.trust:
        return 1
    print("\n".join(_NO_DEVICE[1:]))
    return 1
