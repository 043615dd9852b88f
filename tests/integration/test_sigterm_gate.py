"""One SIGTERM during `gpufleet gate` on a real (simulated) node: the gate under way finishes (the node
passes, exit 0), and every report file says the run was asked to stop and what was done about it. A
signal is never absorbed silently."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from gpufleet_sim.fleet import Fleet

from tests.integration.conftest import gate_process


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=1, subnet="127.0.67")
    return started


def test_one_sigterm_lets_the_gate_finish_and_its_report_says_it_was_asked_to_stop(
    fleet: Fleet, tmp_path: Path
) -> None:
    report_dir = tmp_path / "gate"
    # the per-task lines tell when the node serves (the burn-in is next)
    proc = gate_process(fleet, tmp_path, report_dir, 5)
    assert proc.stdout is not None
    seen, sent = [], False
    for line in proc.stdout:
        seen.append(line)
        if not sent and "Wait until each instance is healthy" in line:
            proc.send_signal(signal.SIGTERM)
            sent = True
    output = "".join(seen)
    code = proc.wait(timeout=120)
    assert sent, output[-2000:]
    assert "SIGTERM: finishing the work under way and starting nothing new" in output
    assert code == 0, output[-2000:]
    report = json.loads((report_dir / "report.json").read_text())
    assert report["hosts"]["node01"]["status"] == "ok", report["hosts"]["node01"]
    said = "asked to stop by SIGTERM: the work under way was finished and nothing new was started"
    assert report["interrupted"] == said
    assert f"**Interrupted:** {said}" in (report_dir / "report.md").read_text()
    assert f"<strong>Interrupted:</strong> {said}" in (report_dir / "report.html").read_text()
    assert 'gpufleet_last_run_interrupted{command="gate"} 1' in (report_dir / "gpufleet.prom").read_text()
