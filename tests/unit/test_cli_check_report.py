"""`gpufleet check` (provision in check mode with diff) and `gpufleet report` (an existing
report.json printed again, report.md and gpufleet.prom rebuilt from it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpufleet import checks, cli
from gpufleet.checks import STATUSES
from gpufleet.commands import CommonOptions, provision
from gpufleet.report import HostReport, Report
from gpufleet.report_files import write

FINISHED = "2026-12-02T10:00:05Z"


def _report(status02: str = "changed") -> Report:
    """Two hosts as provision writes them: node01 ok, node02 with a check and a change."""
    report = Report(command="provision", started="2026-12-02T10:00:00Z", finished=FINISHED)
    gpus = [{"uuid": "GPU-a", "power": {"enforced_limit_w": 1400.0, "requested_limit_w": 1400.0}}]
    report.hosts["node01"] = HostReport(status="ok", facts={"gpufleet_gpus": gpus})
    report.hosts["node02"] = HostReport(
        status=status02,
        checks=[checks.check("gpu.count", status02 in ("ok", "changed"), 16, 16, "GPUs", "16 of 16")],
        changes=[{"setting": "gpu_power.enforced_limit_w[GPU-b]", "from": 1100.0, "to": 1400.0}],
        facts={"gpufleet_gpus": [{"uuid": "GPU-b", "power": {"enforced_limit_w": 1100.0}}]},
        message="a PDU protection lowered the limit",
    )
    return report


def test_report_prints_and_rebuilds_the_files_it_was_written_with(tmp_path: Path, capsys) -> None:
    paths = write(_report(), tmp_path)
    written = {kind: path.read_text() for kind, path in paths.items()}
    paths["md"].unlink()
    paths["prom"].write_text("stale\n")
    paths["html"].unlink()

    assert cli.main(["report", "--report-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == written["md"]
    assert {kind: path.read_text() for kind, path in paths.items()} == written
    assert not list(tmp_path.glob("*.tmp"))

    assert set(paths) == {"json", "md", "prom", "html"} and written["html"].startswith("<!DOCTYPE html>")
    for fmt in ("json", "prom", "html"):
        assert cli.main(["report", "--report-dir", str(tmp_path), "--format", fmt]) == 0
        assert capsys.readouterr().out == written[fmt]
    # the textfile says when the run finished, however late it is rendered again
    stamp = datetime.strptime(FINISHED, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    assert f'gpufleet_last_run_timestamp_seconds{{command="provision"}} {stamp:.0f}\n' in written["prom"]


@pytest.mark.parametrize("status", STATUSES)
def test_report_exit_status_is_the_writers(status: str, tmp_path: Path, capsys) -> None:
    write(_report(status), tmp_path)
    expected = 0 if status in ("ok", "changed") else 1
    assert cli.main(["report", "--report-dir", str(tmp_path), "--format", "json"]) == expected
    assert json.loads(capsys.readouterr().out)["hosts"]["node02"]["status"] == status


def test_missing_report_is_a_usage_error_naming_the_path(tmp_path: Path, capsys) -> None:
    assert cli.main(["report", "--report-dir", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'nowhere' / 'report.json'}: no report there" in err
    assert not (tmp_path / "nowhere").exists()


def _broken(edit: Callable[[dict[str, Any]], object]) -> str:
    """report.json as written, with one edit."""
    data: dict[str, Any] = json.loads(json.dumps(_report().as_dict()))
    edit(data)
    return json.dumps(data)


GARBLED = {
    "truncated": (json.dumps(_report().as_dict())[:200], "not JSON"),
    "not utf-8": (b"\xff\xfe{}", "cannot be read"),
    "a list": ("[]", "not a JSON object"),
    "another schema": (_broken(lambda d: d.update(gpufleet_report=3)), "not a gpufleet report"),
    "a boolean schema": (_broken(lambda d: d.update(gpufleet_report=True)), "not a gpufleet report"),
    "no hosts": (_broken(lambda d: d.pop("hosts")), "hosts: missing or not an object"),
    "no command": (_broken(lambda d: d.pop("command")), "command: missing or not a string"),
    "unknown status": (
        _broken(lambda d: d["hosts"]["node02"].update(status="fine")),
        "hosts.node02.status: 'fine' is not one of ok, changed",
    ),
    "check without ok": (
        _broken(lambda d: d["hosts"]["node02"]["checks"][0].pop("ok")),
        "hosts.node02.checks[0]: missing ok",
    ),
    "change as a string": (
        _broken(lambda d: d["hosts"]["node02"]["changes"].append("x")),
        "hosts.node02.changes[1]: missing setting, from, to",
    ),
    "gpu without uuid": (
        _broken(lambda d: d["hosts"]["node02"]["facts"]["gpufleet_gpus"][0].pop("uuid")),
        "hosts.node02.facts.gpufleet_gpus[0]: not a GPU",
    ),
}


@pytest.mark.parametrize("content,message", GARBLED.values(), ids=GARBLED.keys())
def test_garbled_report_is_a_usage_error_naming_the_path(
    content: str | bytes, message: str, tmp_path: Path, capsys
) -> None:
    source = tmp_path / "report.json"
    if isinstance(content, bytes):
        source.write_bytes(content)
    else:
        source.write_text(content)
    assert cli.main(["report", "--report-dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"gpufleet: error: {source}")
    assert message in captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_unknown_format_is_refused_by_the_parser(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["report", "--report-dir", str(tmp_path), "--format", "pdf"])
    assert exc.value.code == 2


@pytest.fixture
def provisions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[CommonOptions]:
    """provision's run replaced (check's and provision's commands both run it): the options it gets,
    and a drifted node's report back."""
    seen: list[CommonOptions] = []

    def fake(options: CommonOptions, display: object = None) -> Report:
        seen.append(options)
        return _report("drifted" if options.check else "changed")

    monkeypatch.setattr(provision, "provision", fake)
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    gpu_nodes:\n      hosts:\n        node02: {}\n"
    )
    return seen


def test_check_is_provision_with_check_and_diff(provisions, tmp_path: Path) -> None:
    inventory, report_dir = tmp_path / "hosts.yml", tmp_path / "r"
    argv = ["-i", str(inventory), "-l", "node02", "-t", "gpu_power", "--report-dir", str(report_dir)]
    assert cli.main(["check", *argv]) == 1
    assert cli.main(["provision", *argv]) == 0
    assert provisions == [
        CommonOptions(inventory, "node02", report_dir, tags="gpu_power", check=True, diff=True),
        CommonOptions(inventory, "node02", report_dir, tags="gpu_power"),
    ]


def test_check_has_no_switch_to_apply(provisions, tmp_path: Path) -> None:
    for flag in ("--check", "--diff", "--fix"):
        with pytest.raises(SystemExit) as exc:
            cli.main(["check", "-i", str(tmp_path / "hosts.yml"), flag])
        assert exc.value.code == 2
    assert provisions == []


def test_check_with_a_missing_inventory_is_a_usage_error(provisions, tmp_path: Path, capsys) -> None:
    assert cli.main(["check", "-i", str(tmp_path / "nope.yml")]) == 2
    assert "nope.yml does not exist" in capsys.readouterr().err
    assert provisions == []
