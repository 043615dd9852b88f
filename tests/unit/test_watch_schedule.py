"""The shipped schedule of `gpufleet watch` (contrib/systemd): the service's command line is one the
CLI accepts (watch, a report dir, node_exporter's textfile directory), and the timer's interval is
the one the WatchStale alert counts three of."""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import Path

import yaml

from gpufleet import cli

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "contrib" / "systemd"


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((UNITS / name).read_text(encoding="utf-8"))
    return parser


def test_the_service_runs_a_watch_the_cli_accepts() -> None:
    service = unit("gpufleet-watch.service")["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0].endswith("/gpufleet")
    args = cli._parser().parse_args(argv[1:])
    assert args.command == "watch"
    assert args.textfile_dir == Path("/var/lib/prometheus/node-exporter")
    assert args.report_dir == Path("/var/lib/gpufleet/watch") and args.inventory is not None
    # exit 1 (a node needs attention) is the report's business, not a failed unit
    assert service["SuccessExitStatus"] == "1" and service["Type"] == "oneshot"


def test_the_timer_interval_is_the_one_watch_stale_counts() -> None:
    calendar = unit("gpufleet-watch.timer")["Timer"]["OnCalendar"]
    minutes = int(re.fullmatch(r"\*:0/(\d+)", calendar).group(1))  # type: ignore[union-attr]
    rules = yaml.safe_load((REPO / "prometheus" / "gpufleet-alerts.yml").read_text(encoding="utf-8"))
    [stale] = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "WatchStale"]
    assert re.search(r">\s*3\s*\*\s*(\d+)", stale["expr"]).group(1) == str(minutes * 60)  # type: ignore[union-attr]
    # a run must end before the next one is due
    timeout = int(unit("gpufleet-watch.service")["Service"]["TimeoutStartSec"])
    assert timeout < minutes * 60
