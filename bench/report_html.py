"""report.html at fleet scale: a synthetic 1,000-node drift report and a 1,000-node gate report,
rendered (html_report.render) and opened in headless Chromium (tests/browser.py).

Drift: 5 % of the nodes drifted in the same 3 settings, every node with the 64 checks a real drift
report carries per node (8 RoCE ports: link state and speed, LLDP neighbour, the leaf's DSCP, PFC,
ECN, CNP priority and MTU; facts empty, as drift's are). Gate: 20 of 1,000 nodes blocked, every node
with the gate's ~170 checks, its coolant loops, and a 16-GPU burn-in trace (the blocked ones 600
samples, crossing the temperature limit with throttle events; the others 120).

Prints per report: render time, file size (target <= 5 MB for the drift page) and the load time in
Chromium, navigation start to the load event's end, median of 3 (target < 3 s). Not a timed test.

    .venv/bin/python bench/report_html.py [--nodes 1000] [--out DIR]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

from gpufleet import html_report  # noqa: E402
from gpufleet.report import HostReport, Report  # noqa: E402
from tests.browser import Chromium  # noqa: E402

PORTS = 8
GPUS = 16
DRIFTED_SETTINGS = (
    ("gpu_power.enforced_limit_w[GPU-0003]", 1100, 1400),
    ("rdma_qos.trust[mlx5_4]", "pcp", "dscp"),
    ("rdma_link.mtu[mlx5_4]", 1500, 4200),
)


def _check(name: str, ok: bool, value: Any, limit: Any, unit: str, message: str) -> dict[str, Any]:
    return {"name": name, "ok": ok, "value": value, "limit": limit, "unit": unit, "message": message}


def fabric_checks(node: str, index: int) -> list[dict[str, Any]]:
    """The 64 checks drift reports per node (as in a real drift report.json)."""
    checks = []
    leaf = f"leaf{index // 16 * 2 + 1:02d}"
    for port in range(PORTS):
        ib, swp = f"mlx5_{port}", f"{leaf}:swp{index % 16 * 4 + port % 4 + 1}"
        link = f"{node}:{ib} -> {swp}"
        checks += [
            _check(
                f"rdma_link.link_state[{ib}]",
                True,
                "ACTIVE",
                "ACTIVE",
                "",
                f"{ib} (ens{21 + port}np0) link is up",
            ),
            _check(
                f"rdma_link.speed_gbps[{ib}]",
                True,
                400,
                400,
                "Gb/s",
                f"{ib} (ens{21 + port}np0) runs at 400 Gb/s",
            ),
            _check(f"fabric.neighbor[{ib}]", True, swp, swp, "", f"{ib} is cabled to {swp} as planned"),
            _check(
                f"fabric.switch_dscp[{link}]",
                True,
                "priority 3",
                "priority 3",
                "",
                f"{link}: the switch puts the host's RoCE DSCP 26 on priority 3,"
                " the host sends it on PFC priority 3",
            ),
            _check(
                f"fabric.switch_pfc[{link}]",
                True,
                [3],
                [3],
                "",
                f"{link}: the switch has PFC on priorities 3, the host on 3",
            ),
            _check(
                f"fabric.switch_ecn[{link}]",
                True,
                "traffic class 3 ECN-marked",
                "ECN-marked",
                "",
                f"{link}: priority 3 egresses in traffic class 3, which the switch ECN-marks",
            ),
            _check(
                f"fabric.cnp_priority[{link}]",
                True,
                6,
                "a priority other than RoCE's 3",
                "",
                f"{link}: the switch puts CNPs (DSCP 48) on priority 6, RoCE on 3",
            ),
            _check(
                f"fabric.switch_mtu[{link}]",
                True,
                9216,
                4200,
                "bytes",
                f"{link}: switch port MTU 9216, host MTU 4200",
            ),
        ]
    return checks


def drift_report(nodes: int) -> Report:
    report = Report(command="drift", started="2026-12-04T06:00:00Z", finished="2026-12-04T06:04:00Z")
    for i in range(nodes):
        name = f"node{i + 1:04d}"
        drifted = i % 20 == 7  # 5 %
        report.hosts[name] = HostReport(
            status="drifted" if drifted else "ok",
            checks=fabric_checks(name, i),
            changes=[{"setting": s, "from": f, "to": t} for s, f, t in DRIFTED_SETTINGS] if drifted else [],
        )
    return report


def trace(samples: int, hot: bool) -> dict[str, Any]:
    gpus = []
    for g in range(GPUS):
        heat = 1.25 if hot and g == 5 else 1.0
        t = [float(s) for s in range(samples)]
        gpus.append(
            {
                "uuid": f"GPU-{g:08x}-0000-0000-0000-000000000000",
                "index": g,
                "t": t,
                "gpu_c": [
                    round(40 + 40 * heat * (1 - math.exp(-s / 40)) + (s * 7 % 5) * 0.3, 1)
                    for s in range(samples)
                ],
                "memory_c": [round(45 + 30 * (1 - math.exp(-s / 50)), 1) for s in range(samples)],
                "sm_mhz": [
                    1980.0 if not (hot and g == 5 and s > samples * 0.6) else 1500.0 for s in range(samples)
                ],
                "power_w": [round(200 + 1000 * (1 - math.exp(-s / 5)), 1) for s in range(samples)],
                "events": [
                    {"t": float(s), "reasons": ["hw_thermal_slowdown"]}
                    for s in range(samples)
                    if hot and g == 5 and s > samples * 0.6 and s % 30 == 0
                ],
            }
        )
    return {
        "interval_s": 1.0,
        "duration_s": float(samples),
        "limits": {"max_gpu_temp_c": 83.0, "max_memory_temp_c": 90.0, "min_tlimit_c": 3.0},
        "gpus": gpus,
    }


def gate_checks(name: str, index: int, blocked: bool) -> list[dict[str, Any]]:
    checks = fabric_checks(name, index)
    for g in range(GPUS):
        uuid = f"GPU-{g:08x}-0000-0000-0000-000000000000"
        hot = blocked and g == 5
        for phase in ("idle", "load"):
            temp = 100.0 if hot and phase == "load" else 70.0
            checks += [
                _check(
                    f"thermal.gpu_temp_c[{uuid}]",
                    temp <= 83,
                    temp,
                    83.0,
                    "C",
                    f"{uuid} at {temp:g} C ({phase})",
                ),
                _check(
                    f"thermal.memory_temp_c[{uuid}]",
                    True,
                    75.0,
                    90.0,
                    "C",
                    f"{uuid} memory at 75 C ({phase})",
                ),
                _check(
                    f"thermal.tlimit_c[{uuid}]",
                    True,
                    12.0,
                    3.0,
                    "C",
                    f"{uuid} 12 C from its slowdown ({phase})",
                ),
                _check(
                    f"thermal.clocks_event_reasons[{uuid}]",
                    not hot,
                    [],
                    [],
                    "",
                    f"{uuid}: no forbidden reason",
                ),
            ]
        checks += [
            _check(
                f"gpu_power.enforced_limit_w[{uuid}]",
                True,
                1400.0,
                1400.0,
                "W",
                "enforced power limit matches",
            ),
            _check(
                f"gpu_power.persistence_mode[{uuid}]", True, True, True, "", f"{uuid} is in persistence mode"
            ),
            _check(f"burn_in.utilization_pct[{uuid}]", True, 99, 90, "%", f"{uuid} at 99 % under load"),
        ]
    for loop in ("1/Baseboard1", "1/Baseboard2"):
        checks += [
            _check(
                f"coolant.flow_lpm[{loop}]",
                True,
                19.2,
                8.0,
                "L/min",
                f"coolant connector {loop} flow 19.2 L/min",
            ),
            _check(
                f"coolant.supply_temp_c[{loop}]",
                True,
                25.0,
                35.0,
                "C",
                f"coolant connector {loop} supply 25 C",
            ),
            _check(
                f"coolant.delta_temp_c[{loop}]", True, 2.1, 12.0, "K", f"coolant connector {loop} delta 2.1 K"
            ),
            _check(
                f"coolant.health[{loop}]", True, "OK", ["OK"], "", f"coolant connector {loop} health is OK"
            ),
            _check(
                f"coolant.leak[{loop}]", True, "OK", "OK", "", f"coolant connector {loop} leak detectors: OK"
            ),
        ]
    return checks


def coolant() -> dict[str, Any]:
    loops = [
        {
            "key": k,
            "name": n,
            "health": "OK",
            "flow_lpm": 19.2,
            "supply_c": 25.0,
            "return_c": 27.1,
            "delta_c": 2.1,
            "leak": "OK",
        }
        for k, n in (
            ("1/Baseboard1", "GPU Baseboard #1 Cold Plates"),
            ("1/Baseboard2", "GPU Baseboard #2 Cold Plates"),
        )
    ]
    return {"connectors": loops, "cdus": []}


def gate_report(nodes: int, blocked: int = 20) -> Report:
    report = Report(command="gate", started="2026-12-04T06:00:00Z", finished="2026-12-04T06:20:00Z")
    calm = trace(120, hot=False)  # shared by the good nodes: the renderer only reads it
    step = max(1, nodes // blocked)
    for i in range(nodes):
        name = f"node{i + 1:04d}"
        bad = i % step == 3 and i // step < blocked
        report.hosts[name] = HostReport(
            status="blocked" if bad else "ok",
            checks=gate_checks(name, i, bad),
            facts={"gpufleet_burn_in": trace(600, hot=True) if bad else calm, "gpufleet_coolant": coolant()},
            message=(
                "did not pass the post-maintenance gate at gpufleet.node.burn_in :"
                " GPU 5 reached 100 C under load"
                if bad
                else ""
            ),
        )
    return report


def measure(chromium: Chromium, name: str, report: Report, out: Path, rounds: int) -> dict[str, float]:
    started = time.perf_counter()
    html = html_report.render(report)
    render_s = time.perf_counter() - started
    path = out / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    loads = []
    for _ in range(rounds):
        facts = chromium.open_page(path, None)
        if facts.console or facts.page_errors or facts.external_requests():
            raise SystemExit(f"{name}: {facts.console} {facts.page_errors} {facts.external_requests()}")
        loads.append(facts.load_ms / 1000)
    size_mb = path.stat().st_size / 1e6
    print(
        f"{name}: {len(report.hosts)} hosts, rendered in {render_s:.1f} s, {size_mb:.2f} MB, "
        f"load {statistics.median(loads):.2f} s "
        f"(median of {rounds}: {', '.join(f'{x:.2f}' for x in loads)}), "
        f"{facts.cells} heat-map cells, {len(facts.charts)} charts ({path})",
        flush=True,
    )
    return {"render_s": render_s, "size_mb": size_mb, "load_s": statistics.median(loads)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--out", type=Path, default=None, help="keep the pages here (default: a temporary folder)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gpufleet-html-") as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        with Chromium() as chromium:
            drift = measure(chromium, "drift", drift_report(args.nodes), out, args.rounds)
            measure(chromium, "gate", gate_report(args.nodes), out, args.rounds)
    met = drift["size_mb"] <= 5 and drift["load_s"] < 3
    print(f"drift page: <= 5 MB and < 3 s: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
