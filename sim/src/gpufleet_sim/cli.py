"""`gpufleet-sim`: the simulated fleet gpufleet is developed and tested on, and `gpufleet-sim demo`.

Simulated nodes are real SSH hosts in their own namespaces with fake tools that speak the real
formats; their BMCs and leaf switches are real HTTPS services. The simulator drives the operator's
tool (gpufleet) as an operator would; gpufleet never imports it."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from gpufleet import cli, procs, report_files
from gpufleet import drift as drift_mod
from gpufleet import watch as watch_mod
from gpufleet.commands import gate as gate_command
from gpufleet.commands import provision as provision_command
from gpufleet.commands import registry
from gpufleet.commands import switch as switch_command
from gpufleet.commands.base import CommonOptions
from gpufleet.progress import Display
from gpufleet.report import Report
from gpufleet_sim import build, control, faults, faults_switch
from gpufleet_sim.fleet import DEFAULT_DIR, Fleet, FleetConfig, SimError
from gpufleet_sim.serving import ServingLoad, fleet_instance_urls

EXIT_OK, EXIT_NOT_OK, EXIT_USAGE = 0, 1, 2

DESCRIPTION = """\
A simulated GPU fleet on this machine: N nodes (real sshd in network namespaces, fake nvidia-smi,
ethtool, dcgmi, vLLM ... speaking the real tools' formats), their Redfish BMCs and two NVUE leaf
switches; faults to inject on any of them. gpufleet runs against it as against real nodes.

typical use:
  gpufleet-sim up --nodes 3                start three nodes and write their inventory
  eval "$(gpufleet-sim env)"               point gpufleet at it (ANSIBLE_INVENTORY, vault password)
  gpufleet-sim fault node02 power-capped   inject a fault (--clear to remove it)
  gpufleet-sim down                        stop everything the fleet started
  gpufleet-sim demo                        the whole story on 3 nodes, reports in reports/demo"""

DEMO_DESCRIPTION = """\
Starts 3 simulated nodes and 2 leaves with faults an operator has met: PFC off on a leaf (drift names
it on every link, the switch play fixes it), a PDU-capped node (provision fixes it), a node whose
coolant flow was not restored (the gate keeps it out of service); then, in service, a PDU cap in waves
and a prefix-cache cliff that one watch names. Exit 0 when every one was found and handled."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet-sim", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # where the fleet lives (its inventory, keys, node state): the tests give each fleet its own
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=argparse.SUPPRESS)
    simsub = parser.add_subparsers(dest="sim_command", required=True)
    demo = simsub.add_parser(
        "demo",
        help="3 simulated nodes, two faulted: drift, the switch play, provision, the gate, a watch",
        description=DEMO_DESCRIPTION,
    )
    demo.add_argument("--report-dir", type=Path, default=Path("reports/demo"), help="where the reports go")
    up = simsub.add_parser(
        "up",
        help="start N simulated nodes and write their inventory",
        description="Start N simulated GPU nodes (each in its own namespaces, reached over SSH on a loopback "
        "address), two leaf switches, their BMCs, and write the fleet's inventory and vault password file.",
    )
    up.add_argument("--nodes", type=int, default=2)
    up.add_argument("--profile", choices=build.PROFILES, default="b300-16")
    up.add_argument("--subnet", default="127.0.1", help="loopback /24 for node addresses")
    up.add_argument("--port", type=int, default=2222, help="sshd port on every node address")
    up.add_argument(
        "--slurm",
        action="store_true",
        help="hold the nodes in a real Slurm cluster (Debian's slurmctld, slurmd and munge, started with "
        "the fleet) instead of the fake scontrol",
    )
    up.add_argument(
        "--sonic-leaf",
        action="append",
        default=[],
        metavar="LEAF",
        help="this leaf (leaf01) runs SONiC: read over SSH with sonic-cfggen, never changed (repeatable)",
    )
    simsub.add_parser(
        "down",
        help="stop every node and remove what the fleet started (exit 2 naming what still runs)",
        description="Stop every simulated node, leaf and BMC and remove what the fleet started; exit 2 "
        "naming what still runs.",
    )
    simsub.add_parser(
        "status",
        help="nodes, addresses, faults, up or down (exit 1 when any is down)",
        description="Print each simulated node's address, its faults and whether it is up; exit 1 when any "
        "is down.",
    )
    simsub.add_parser(
        "inventory",
        help="print the inventory path",
        description="Print the path of the simulated fleet's inventory (gpufleet -i takes it).",
    )
    simsub.add_parser(
        "env",
        help="print the export lines that point gpufleet at this fleet (inventory, vault password)",
        description="Print the export lines (ANSIBLE_INVENTORY, ANSIBLE_VAULT_PASSWORD_FILE) that point "
        'gpufleet at this fleet: eval "$(gpufleet-sim env)".',
    )
    reboot = simsub.add_parser(
        "reboot",
        help="reboot a node: volatile settings are lost, boot units run",
        description="Reboot a simulated node: its volatile settings (power limits, QoS, clocks) are lost and "
        "its boot units run again, as on a real reboot.",
    )
    reboot.add_argument("node")
    fault = simsub.add_parser(
        "fault",
        help="inject (or --clear) a fault on a node, or on a leaf (leaf02)",
        description="Inject a fault on a simulated node (a capped power limit, low coolant flow, an Xid, "
        "...) or on a leaf switch (PFC off, a lossy DSCP map, ...); --clear clears it, or every fault "
        "when none is named.",
    )
    fault.add_argument("node", help="a node (node02) or a leaf switch (leaf02)")
    fault.add_argument("fault", nargs="?", choices=sorted([*faults.FAULTS, *faults_switch.LEAF_FAULTS]))
    fault.add_argument("--clear", action="store_true", help="clear this fault, or all faults if none named")
    return parser


def _sim(args: argparse.Namespace) -> int:
    fleet = Fleet(args.dir)
    if args.sim_command == "demo":
        return _demo(args)
    if args.sim_command == "up":
        config = FleetConfig(
            args.nodes, args.profile, args.subnet, args.port, args.slurm, tuple(args.sonic_leaf)
        )
        described = control.up(fleet, config)
        for name, where in described["nodes"].items():
            print(f"{name}  {where['address']}:{where['port']}  up")
        print(f"inventory: {fleet.inventory_path}")
        print(f'for gpufleet: eval "$(gpufleet-sim{_dir_option(args)} env)"')
    elif args.sim_command == "down":
        print("simulated fleet stopped" if control.down(fleet) else "no simulated fleet was up")
    elif args.sim_command == "status":
        rows = control.status(fleet)
        if not rows:
            print("no simulated fleet is up")
        for row in rows:
            print(
                f"{row['name']}  {row['address']}  {row['profile']}  gpus={row['gpus']} nics={row['nics']}"
                f"  faults={','.join(row['faults']) or '-'}  {'up' if row['up'] else 'down: ' + row['down']}"
            )
        problem = control.supervisor_problem(fleet) if rows else None
        if problem:
            print(problem)
        if problem or not all(row["up"] for row in rows):
            return EXIT_NOT_OK
    elif args.sim_command == "inventory":
        print(fleet.inventory_path)
    elif args.sim_command == "env":
        print(f"export ANSIBLE_INVENTORY={shlex.quote(str(fleet.inventory_path))}")
        print(f"export ANSIBLE_VAULT_PASSWORD_FILE={shlex.quote(str(fleet.vault_password_file))}")
    elif args.sim_command == "reboot":
        control.reboot(fleet, args.node)
        print(f"{args.node}: rebooted")
    elif args.sim_command == "fault":
        changed = control.fault(fleet, args.node, args.fault, args.clear)
        verb = "cleared" if args.clear else "injected"
        print(f"{args.node}: {verb} {', '.join(changed)}" if changed else f"{args.node}: nothing to do")
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    procs.become_subreaper()
    try:
        return _demo_run(args)
    finally:
        procs.reap_children(timeout=5.0)


def _demo_run(args: argparse.Namespace) -> int:
    """3 simulated nodes and their 2 leaves: PFC off on a leaf (drift names it on every link, the
    switch play fixes it), one node PDU-capped (provision fixes it), one with its coolant flow not
    restored after maintenance (the gate keeps it out of service); then, in service, a PDU cap in
    waves and a prefix-cache cliff that one watch names."""
    fleet = Fleet(args.dir)
    control.down(fleet)
    described = control.up(fleet, FleetConfig(nodes=3, profile="b300-16"))
    print(f"simulated fleet up: {', '.join(described['nodes'])}, leaves leaf01, leaf02")
    try:
        control.fault(fleet, "leaf02", "switch-pfc-off", clear=False)
        print("fault: leaf02 switch-pfc-off (PFC not on on the switch: RoCE drops under load)")
        control.fault(fleet, "node02", "power-capped", clear=False)
        print("fault: node02 power-capped (a PDU protection lowered every GPU's limit by 300 W)")
        control.fault(fleet, "node03", "low-coolant-flow", clear=False)
        print("fault: node03 low-coolant-flow (a valve left part-closed after work on the water loop)")
        base = args.report_dir
        vault = fleet.vault_password_file
        console = registry.console()
        drift = _written(
            drift_mod.drift(
                drift_mod.DriftOptions(fleet.inventory_path, None, base / "drift", vault, False, "10%", 0.0),
                console,
            ),
            base / "drift",
        )
        caught = _fabric_findings(drift)
        print("drift: the switch side of the fabric, both ends of each link:")
        print("".join(f"  {line}\n" for line in caught) or "  nothing found\n")
        switch = _written(
            switch_command.switch(
                CommonOptions(
                    fleet.inventory_path, "leaf_switches", base / "switch", vault_password_file=vault
                ),
                console,
            ),
            base / "switch",
        )
        print((base / "switch" / "report.md").read_text(encoding="utf-8"))
        provision = _written(
            provision_command.provision(
                CommonOptions(fleet.inventory_path, None, base / "provision", vault_password_file=vault),
                console,
            ),
            base / "provision",
        )
        print((base / "provision" / "report.md").read_text(encoding="utf-8"))
        print(f"provision, as a page: {(base / 'provision' / 'report.html').resolve()}")
        gate = _written(
            gate_command.gate(
                CommonOptions(fleet.inventory_path, None, base / "gate", vault_password_file=vault),
                burn_in_seconds=20,
                display=console,
            ),
            base / "gate",
        )
        print((base / "gate" / "report.md").read_text(encoding="utf-8"))
        print(f"the gate, as a page (burn-in charts): {(base / 'gate' / 'report.html').resolve()}")
        cli.print_summary(gate, base / "gate")
        watched = _demo_watch(fleet, base / "watch", console)
    finally:
        control.down(fleet)
        print("simulated fleet stopped")
    # The demo succeeds when drift named the switch fault, the switch play fixed it, provision fixed
    # node02 and the gate admitted node01/node02 only.
    fabric_named = any(line.startswith("fabric.switch_pfc: node01:mlx5_4 -> leaf02:swp1") for line in caught)
    switched = switch.hosts["leaf02"].status == "changed" and switch.all_ok()
    provisioned = {name: host.status for name, host in provision.hosts.items()}
    gated = {name: host.status for name, host in gate.hosts.items() if name.startswith("node")}
    fixed = provisioned.get("node02") == "changed" and provision.all_ok()
    admitted = gated == {"node01": "ok", "node02": "ok", "node03": "blocked"}
    in_service = _named(watched, "node01", "gpu_power.enforced_limit_w[") and _named(
        watched, "node02", "service.prefix_cache_hit_rate["
    )
    print(
        f"demo: switch fault named {fabric_named}, leaf02 fixed {switched}; "
        f"provision {json.dumps(provisioned)}; gate {json.dumps(gated)}; "
        f"in-service incidents named {in_service}"
    )
    return EXIT_OK if fabric_named and switched and fixed and admitted and in_service else EXIT_NOT_OK


def _written(report: Report, report_dir: Path) -> Report:
    """The report's files written into report_dir, as gpufleet writes a command's."""
    report_files.write(report, report_dir)
    return report


def _demo_watch(fleet: Fleet, report_dir: Path, console: Display) -> Report:
    """The admitted nodes serve; a PDU caps node01 in waves and a template breaks node02's prefix
    cache; one `gpufleet watch` names both."""
    with ServingLoad(fleet_instance_urls(fleet.root)):
        control.fault(fleet, "node01", "pdu-cap-in-service", clear=False)
        print("fault: node01 pdu-cap-in-service (in service: the PDU caps every GPU 300 W lower, 5 s in 10)")
        control.fault(fleet, "node02", "prefix-cache-cliff", clear=False)
        print(
            "fault: node02 prefix-cache-cliff (in service: a template put a session id in the system prompt)"
        )
        watched = watch_mod.watch(
            watch_mod.WatchOptions(
                fleet.inventory_path, "node01,node02", report_dir, fleet.vault_password_file
            ),
            console,
        )
        report_files.write(watched, report_dir)
    print(f"watch: {report_dir / 'report.md'}")
    for name, host in sorted(watched.hosts.items()):
        print(f"  {name}: {host.status}: {host.message or 'nothing found'}")
    return watched


def _named(report: Report, host: str, check_prefix: str) -> bool:
    found = report.hosts.get(host)
    return found is not None and any(not c["ok"] and c["name"].startswith(check_prefix) for c in found.checks)


def _fabric_findings(report: Report) -> list[str]:
    """The failed switch-side checks of a report (one line each) and the switches' drift."""
    lines = []
    for name, host in sorted(report.hosts.items()):
        lines += [
            f"{c['name'].split('[')[0]}: {c['message']}"
            for c in host.checks
            if not c["ok"] and c["name"].startswith("fabric.switch")
        ]
        lines += [
            f"{name}: drifted {c['setting']}: {c['from']} -> {c['to']}"
            for c in host.changes
            if name.startswith("leaf")
        ]
    return lines


def _dir_option(args: argparse.Namespace) -> str:
    return "" if args.dir == DEFAULT_DIR else f" --dir {shlex.quote(str(args.dir))}"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _sim(args)
    except (SimError, faults.FaultError, ValueError) as exc:
        print(f"gpufleet-sim: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_NOT_OK


if __name__ == "__main__":
    sys.exit(main())
