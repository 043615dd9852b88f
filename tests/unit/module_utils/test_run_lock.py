"""The run lock on the node (module_utils/node/run_lock.py): one holder at a time, taken atomically, named
when refused, broken only when asked; a file that is no holder's record holds nothing."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.node import run_lock


def holder(run: str) -> dict[str, object]:
    return {
        "id": run,
        "user": "alice",
        "command": "gpufleet drift --fix",
        "controller": "laptop1",
        "pid": 4242,
        "started": "2026-12-04T10:00:00+0000",
    }


def test_one_holder_and_its_own_run_again(tmp_path: Path) -> None:
    path = str(tmp_path / "lock" / "gpufleet-run.json")
    assert run_lock.take(path, holder("a")) == {"changed": True, "notes": []}
    # the same run's later plays take it again, unchanged
    assert run_lock.take(path, holder("a")) == {"changed": False, "notes": []}
    with pytest.raises(run_lock.Held) as refused:
        run_lock.take(path, holder("b"))
    assert str(refused.value).startswith(
        "held by gpufleet drift --fix by alice on laptop1 (pid 4242, started 2026-12-04T10:00:00+0000)"
    )
    assert "--break-lock" in str(refused.value) and refused.value.holder["id"] == "a"
    # another run's release leaves it; the holder's frees it
    assert run_lock.release(path, "b")["changed"] is False
    assert run_lock.release(path, "a") == {"changed": True, "holder": None}
    assert not Path(path).exists()


def test_racing_runs_get_it_once(tmp_path: Path) -> None:
    path = str(tmp_path / "gpufleet-run.json")
    won: list[str] = []
    start = threading.Barrier(8)

    def race(run: str) -> None:
        start.wait()
        try:
            run_lock.take(path, holder(run))
            won.append(run)
        except run_lock.Held:
            pass

    threads = [threading.Thread(target=race, args=(f"run{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert json.loads(Path(path).read_text())["id"] == won[0]


def test_a_dead_holder_is_broken_only_when_asked(tmp_path: Path) -> None:
    path = str(tmp_path / "gpufleet-run.json")
    run_lock.take(path, holder("dead"))
    with pytest.raises(run_lock.Held):
        run_lock.take(path, holder("next"))
    taken = run_lock.take(path, holder("next"), break_lock=True)
    assert taken["changed"] is True
    (note,) = taken["notes"]
    assert note.startswith("broke the lock of gpufleet drift --fix by alice on laptop1 (pid 4242")
    kept = note.rsplit("kept in ", 1)[1]
    assert json.loads(Path(kept).read_text())["id"] == "dead"
    assert json.loads(Path(path).read_text())["id"] == "next"


@pytest.mark.parametrize("content", ["", "not json", "[1, 2]", '{"id": "x"}', '{"id": {"a": 1}, "pid": []}'])
def test_a_file_of_the_wrong_shape_holds_nothing_and_is_named(tmp_path: Path, content: str) -> None:
    path = tmp_path / "gpufleet-run.json"
    path.write_text(content)
    taken = run_lock.take(str(path), holder("a"))
    assert taken["changed"] is True
    (note,) = taken["notes"]
    assert note.startswith(f"{path} was not") and "moved to" in note
    moved = Path(note.split("moved to ", 1)[1].split(",", 1)[0])
    assert moved.read_text() == content
    assert json.loads(path.read_text())["id"] == "a"
