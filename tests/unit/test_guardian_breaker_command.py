"""`gpufleet breaker` prints the guardian's circuit breaker (open or closed, its limit from the inventory,
what is used of it, when it opened, its last close); `gpufleet breaker close --reason "..."` closes it, the
reason required and 1..200 printable characters (exit 2 naming the option otherwise)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpufleet import cli, guardian_breaker
from gpufleet.commands import breaker
from gpufleet.guardian_breaker import BreakerState, admit, record
from gpufleet.guardian_escalation import iso
from gpufleet.guardian_settings import BreakerSettings

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def _opened(state_dir: Path) -> Path:
    where = guardian_breaker.path(state_dir)
    state = BreakerState()
    record(state, "gpu-01", NOW)
    assert not admit(state, "gpu-02", NOW, 1, timedelta(minutes=60))
    guardian_breaker.save(state, where)
    return where


def test_close_with_a_reason(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    where = _opened(state_dir)
    assert cli.main(["breaker", "close", "--reason", "gpu-01 RMA filed; gpu-02 checked"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"closed the breaker (open since {iso(NOW)}); 1 quarantine counted so far forgiven (gpu-01)"
    )
    assert "breaker: closed" in out and "last closed:" in out and "gpu-01 RMA filed; gpu-02 checked" in out
    state = guardian_breaker.load(where)
    assert not state.open and state.events == []
    assert state.closed_by_reason[-1]["reason"] == "gpu-01 RMA filed; gpu-02 checked"


def test_close_without_a_reason_is_exit_2(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["breaker", "close"])
    assert exited.value.code == 2
    assert "--reason" in capsys.readouterr().err


@pytest.mark.parametrize("reason", ["", "x" * 201, "line\nbreak"])
def test_a_reason_out_of_range_is_exit_2_naming_it(
    state_dir: Path, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = _opened(state_dir)
    assert cli.main(["breaker", "close", "--reason", reason]) == 2
    err = capsys.readouterr().err
    assert "--reason must be 1..200 printable characters" in err
    assert guardian_breaker.load(where).open


def test_a_corrupt_state_is_exit_2_naming_the_file(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = guardian_breaker.path(state_dir)
    where.parent.mkdir(parents=True)
    where.write_text("{")
    assert cli.main(["breaker", "close", "--reason", "checked"]) == 2
    assert str(where) in capsys.readouterr().err
    assert where.read_text() == "{"


def test_describe_open_with_the_fleets_limit(state_dir: Path) -> None:
    where = _opened(state_dir)
    lines = breaker.describe(guardian_breaker.load(where), where, NOW, (BreakerSettings(2, 10, 60), 32))
    text = "\n".join(lines)
    assert lines[0].startswith(f"breaker: OPEN since {iso(NOW)} (gpu-02 would have been")
    assert 'gpufleet breaker close --reason "<what was checked>"' in text
    assert (
        "limit: 2 nodes per 60 min (guardian_breaker_max_nodes 2, guardian_breaker_max_percent 10 of 32"
        in text
    )
    assert f"used: 1 in the last 60 min (gpu-01 {iso(NOW)})" in text
    assert f"state: {where}" in text


def test_show_reads_the_inventorys_settings(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n"
        "  vars:\n"
        "    guardian_breaker_max_nodes: 1\n"
        "  children:\n"
        "    gpu_nodes:\n"
        "      hosts:\n"
        "        gpu-01: {ansible_host: 127.0.0.1}\n"
        "        gpu-02: {ansible_host: 127.0.0.2}\n"
    )
    assert cli.main(["breaker", "-i", str(inventory)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("breaker: closed")
    assert "limit: 1 node per 60 min (guardian_breaker_max_nodes 1" in out and "of 2 GPU nodes" in out
    assert "used: 0 in the last 60 min" in out
    # a setting out of range: exit 2 naming it
    inventory.write_text(inventory.read_text().replace("max_nodes: 1", "max_nodes: -1"))
    assert cli.main(["breaker", "-i", str(inventory)]) == 2
    assert "guardian_breaker_max_nodes is -1 on gpu-01, gpu-02" in capsys.readouterr().err
