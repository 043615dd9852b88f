"""gpufleet release: --limit and --reason refused before anything runs (exit 2, naming the option and the
range); the host's report says what was cleared and that the node stays drained; playbooks/release.yml on a
local node appends `cleared` with the pending mark's class and the reason, verbatim (never templated), and
in check mode writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpufleet import cli, events, preflight
from gpufleet.commands import registry, release
from tests.unit.machine_run_lock import machine_run_lock  # noqa: F401  (autouse: one test at a time)

REPO = Path(__file__).resolve().parents[2]
MARK = {
    "time": "2026-12-06T20:31:05Z",
    "class": "row_remap",
    "action": "replace_hardware",
    "outcome": "ok",
    "checks": [],
    "detail": "2 GPU resets in 168 h",
    "run": "r0",
}


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["release", "--reason", "GPU 3 replaced"], "--limit is required"),
        (["release", "--limit", "node01"], "--reason is required: what was repaired, 1..200 printable"),
        (["release", "--limit", "node01", "--reason", "  "], "--reason must be 1..200 printable characters"),
        (["release", "--limit", "node01", "--reason", "x" * 201], "--reason must be 1..200 printable"),
        (["release", "--limit", "node01", "--reason", "GPU\x1b[2J swapped"], "with a control character"),
    ],
)
def test_a_missing_or_bad_argument_is_refused_before_anything_runs(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def nothing(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the inventory was read: the refusal came too late")

    monkeypatch.setattr(preflight, "inventory_file", nothing)
    assert cli.main(argv) == 2
    assert said in capsys.readouterr().err


def test_the_command_holds_its_nodes_and_its_check_changes_nothing() -> None:
    command = registry.COMMANDS["release"]
    parser = cli._parser()
    args = parser.parse_args(["release", "--limit", "node01", "--reason", " GPU 3 replaced "])
    command.validate(args)
    assert args.reason == "GPU 3 replaced"
    assert command.holds_as(args) == "gpufleet release" and command.reported_as(args) == "release"
    checking = parser.parse_args(["release", "--limit", "node01", "--reason", "x", "--check"])
    assert command.holds_as(checking) is None and command.reported_as(checking) == "release --check"
    assert "stays drained until the gate" in command.description


def host(facts: dict[str, Any], changed: bool = True) -> events.HostResult:
    result = events.HostResult.from_tasks("node01", [{"task": "Record", "outcome": "ok", "changed": changed}])
    result.facts.update(facts)
    return result


def test_the_report_says_what_was_cleared_and_that_the_node_stays_drained() -> None:
    cleared = {"cleared": True, "class": "row_remap", "marked": MARK["time"], "reason": "GPU 3 replaced"}
    said = release.release_host(host({"gpufleet_release": cleared}), check_mode=False).message
    assert said.startswith("replace-hardware mark (row_remap, marked 2026-12-06T20:31:05Z) cleared: GPU 3")
    assert "stays drained until the gate returns it (gpufleet gate --limit node01)" in said
    would = release.release_host(host({"gpufleet_release": cleared}), check_mode=True).message
    assert "would be cleared" in would
    none = {"cleared": False, "class": "", "marked": "", "reason": "GPU 3 replaced"}
    assert release.release_host(host({"gpufleet_release": none}, False), False).message == (
        "no replace-hardware mark: nothing cleared"
    )


def play(tmp_path: Path, reason: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """playbooks/release.yml on one local node whose history is tmp_path/h.json, as the command runs it."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[gpu_nodes]\n"
        f"node-a ansible_connection=local ansible_python_interpreter={sys.executable} "
        f"guardian_history_path={tmp_path / 'h.json'}\n"
    )
    holder = {
        "id": f"test-release-{os.getpid()}",
        "user": "test",
        "command": "gpufleet release",
        "controller": "test",
        "pid": os.getpid(),
        "started": "2026-12-06T21:00:00Z",
    }
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({**release.extravars(reason), "gpufleet_run": holder}))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(REPO / ".gpufleet" / "collections")  # this checkout, as ansible.cfg
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), "-e", f"@{extra}"]
    argv += ["--check"] if check else []
    return subprocess.run(
        [*argv, "playbooks/release.yml"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env=env,
        timeout=300,
    )


def test_the_playbook_appends_cleared_with_the_reason_verbatim_and_check_writes_nothing(
    tmp_path: Path,
) -> None:
    history = tmp_path / "h.json"
    history.write_text(json.dumps({"events": [MARK]}))
    reason = "GPU 3 replaced {{ 7 * 6 }}, RMA 4711"
    checked = play(tmp_path, reason, check=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "changed=1" in checked.stdout
    assert json.loads(history.read_text()) == {"events": [MARK]}
    done = play(tmp_path, reason)
    assert done.returncode == 0, done.stdout + done.stderr
    [mark, cleared] = json.loads(history.read_text())["events"]
    assert mark == MARK
    assert (cleared["class"], cleared["action"], cleared["outcome"]) == ("row_remap", "cleared", "ok")
    assert cleared["detail"] == reason and cleared["run"].startswith("test-release-")
    # the run lock taken and given back
    assert not Path("/run/gpufleet/run-lock.json").exists()
    # a node with no mark is left as it is
    again = play(tmp_path, "again")
    assert again.returncode == 0 and "changed=0" in again.stdout
    assert len(json.loads(history.read_text())["events"]) == 2
