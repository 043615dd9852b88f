# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What the RDMA modules that change a node share: running a tool, writing a sysfs file,
naming the mlx5 ports. Each failure ends the module with a message the operator can act on.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.rdma import (
    ParseError,
    ib_ports,
    list_ib_devices,
    read_ib_port,
)

__all__ = ["ENV", "first_line", "port_names", "run_tool", "tool_output", "write_sysfs"]

# Tool messages and number formats are only stable in the C locale.
ENV = {"LC_ALL": "C"}


def first_line(*texts: str | None) -> str:
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()
    return "no output"


def run_tool(module: Any, cmd: list[str], parser: Any, hint: str) -> Any:
    """Run a tool and parse what it printed; fail with the command and its output on either error."""
    rc, out, err = module.run_command(cmd, environ_update=ENV)
    return tool_output(module, cmd, (rc, out, err), parser, hint)


def tool_output(module: Any, cmd: list[str], ran: tuple[int, str, str], parser: Any, hint: str) -> Any:
    """What a tool printed, parsed (None parser: the text); fail on a non-zero exit or unreadable output."""
    rc, out, err = ran
    if rc != 0:
        module.fail_json(
            msg="%s failed (rc=%d): %s. %s" % (" ".join(cmd), rc, first_line(out, err), hint),
            cmd=cmd,
            rc=rc,
            stdout=out,
            stderr=err,
        )
    if parser is None:
        return out
    try:
        return parser(out)
    except ParseError as exc:
        module.fail_json(
            msg="Could not read the output of %s: %s. Run it by hand on this node to see what it prints."
            % (" ".join(cmd), exc),
            cmd=cmd,
            rc=rc,
            stdout=out,
            stderr=err,
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
    for ibdev in list_ib_devices():
        if not ibdev.startswith("mlx5"):
            continue
        port = (ib_ports(ibdev) or [1])[0]
        names[ibdev] = {"port": port, "netdev": read_ib_port(ibdev, port)["netdev"]}
    return names
