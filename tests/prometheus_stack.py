"""Debian's node_exporter, Prometheus and Alertmanager on 127.0.0.1, for a ``with`` block.

node_exporter runs its textfile collector alone, on the directory gpufleet writes; Prometheus
scrapes it every second and evaluates the given rule files every second, alerting to the
Alertmanager. Each daemon gets a free port and its own config, storage and log in ``workdir``;
entering the block waits until all three answer, leaving it stops them, also when starting one
failed. A wait that runs out fails with the daemons' log tails.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar

import pytest
import yaml
from gpufleet_sim import processes
from gpufleet_sim.ports import free_port

T = TypeVar("T")
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
PROMETHEUS = "/usr/bin/prometheus"
ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
JOB = "gpufleet-textfile"


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)


class PrometheusStack:
    def __init__(self, textfile_dir: Path, rule_files: list[Path], workdir: Path) -> None:
        self.textfile_dir = textfile_dir
        self.rule_files = rule_files
        self.workdir = workdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.exporter = f"127.0.0.1:{free_port()}"
        self.alertmanager = f"http://127.0.0.1:{free_port()}"
        self.prometheus = f"http://127.0.0.1:{free_port()}"

    def __enter__(self) -> Self:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _start(self) -> None:
        self._spawn(
            "node_exporter",
            NODE_EXPORTER,
            f"--web.listen-address={self.exporter}",
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={self.textfile_dir}",
        )
        am_config = self._write(
            "alertmanager.yml", {"route": {"receiver": "none"}, "receivers": [{"name": "none"}]}
        )
        self._spawn(
            "alertmanager",
            ALERTMANAGER,
            f"--config.file={am_config}",
            f"--storage.path={self.workdir / 'alertmanager-data'}",
            f"--web.listen-address={self.alertmanager.removeprefix('http://')}",
            "--cluster.listen-address=",  # no gossip: a single, private Alertmanager
        )
        config = self._write(
            "prometheus.yml",
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(path) for path in self.rule_files],
                "alerting": {
                    "alertmanagers": [
                        {"static_configs": [{"targets": [self.alertmanager.removeprefix("http://")]}]}
                    ]
                },
                "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [self.exporter]}]}],
            },
        )
        self._spawn(
            "prometheus",
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.workdir / 'prometheus-data'}",
            f"--web.listen-address={self.prometheus.removeprefix('http://')}",
            # A reload rebuilds the notifier, which finds the Alertmanager again only after up to 5 s:
            # what fires meanwhile is dropped until the next resend (1 min by default).
            "--rules.alert.resend-delay=1s",
        )
        self.wait_for(
            "node_exporter serves /metrics", lambda: self._answers(f"http://{self.exporter}/metrics")
        )
        self.wait_for("Alertmanager is ready", lambda: self._answers(f"{self.alertmanager}/-/ready"))
        self.wait_for("Prometheus is ready", lambda: self._answers(f"{self.prometheus}/-/ready"))

    def _write(self, name: str, content: dict[str, Any]) -> Path:
        path = self.workdir / name
        path.write_text(yaml.safe_dump(content))
        return path

    def _spawn(self, name: str, *argv: str) -> None:
        log = (self.workdir / f"{name}.log").open("wb")
        with log:
            self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def _answers(self, url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def wait_scraped(self) -> None:
        """Until Prometheus has scraped node_exporter: its first scrape waits for service discovery's
        first update, ~5 s after the start (so a test starts the stack before its slow steps)."""

        def up() -> bool:
            return any(t["health"] == "up" for t in self.api("targets")["activeTargets"])

        self.wait_for("Prometheus scraped node_exporter", up)

    def stop(self) -> None:
        processes.terminate_all(list(self.procs.values()))

    def logs(self) -> str:
        """The last lines of each daemon's log, and how it exited if it did."""
        out = []
        for name, proc in self.procs.items():
            lines = (self.workdir / f"{name}.log").read_text(errors="replace").splitlines()[-15:]
            exited = "" if proc.poll() is None else f" (exited {proc.returncode})"
            out.append(f"--- {name}{exited}\n" + "\n".join(lines))
        return "\n".join(out)

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float = 30) -> T:
        """The first truthy value of ``probe()``, polled; fails naming ``what``, with the logs."""
        deadline = time.monotonic() + timeout
        while True:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    pytest.fail(f"{name} exited while waiting until {what}\n{self.logs()}")
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"not within {timeout} s: {what}\n{self.logs()}")
            time.sleep(0.2)

    def api(self, path: str, **params: str) -> Any:
        """Prometheus' /api/v1/<path>: its data, after it said success."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        answer = get_json(f"{self.prometheus}/api/v1/{path}{query}")
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's series."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    def alerts(self, name: str, state: str) -> list[dict[str, Any]]:
        """Prometheus' alerts named ``name`` in ``state`` (pending, firing)."""
        alerts = self.api("alerts")["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == name and a["state"] == state]

    def alertmanager_alerts(self, name: str) -> list[dict[str, Any]]:
        """What Alertmanager holds (/api/v2/alerts) of ``name``."""
        alerts: list[dict[str, Any]] = get_json(f"{self.alertmanager}/api/v2/alerts")
        return [a for a in alerts if a["labels"]["alertname"] == name]

    def reload(self, rule_name: str, duration_s: float) -> None:
        """Reloads the config and rule files (SIGHUP); returns once ``rule_name`` has ``for: duration_s``."""
        self.procs["prometheus"].send_signal(signal.SIGHUP)

        def reloaded() -> bool:
            groups = self.api("rules")["groups"]
            return any(
                r["name"] == rule_name and r.get("duration") == duration_s for g in groups for r in g["rules"]
            )

        self.wait_for(f"Prometheus reloaded {rule_name} with for: {duration_s}s", reloaded)
