"""gpufleet.node.gpu_reset against a simulated node (the fake nvidia-smi: the real refusal, exit 255, while
persistence mode or a process holds a GPU) and a fake tool for what the simulator never says: the exact
calls, a GPU in use refused before anything changes, persistence turned off first and left off, every GPU
reset and read again, each refusal failing with the tool's words, check mode changing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_reset as reset_utils
from ansible_collections.gpufleet.node.plugins.modules import gpu_reset
from gpufleet_sim import faults, state
from gpufleet_sim.tools import vllm_engine

from tests.unit.modules import harness
from tests.unit.modules.simnode import SMI, SimNode, _which, run_module

QUERY = [
    SMI,
    "--query-gpu=uuid,pci.bus_id,persistence_mode,power.limit,enforced.power.limit,power.default_limit,"
    "power.min_limit,power.max_limit",
    "--format=csv,noheader,nounits",
]
APPS = [SMI, "--query-compute-apps=gpu_bus_id,gpu_uuid,pid,process_name,used_gpu_memory", "--format=csv"]


@pytest.fixture
def node(tmp_path: Path) -> SimNode:
    return SimNode(tmp_path / "node", "h100-8")


def failing(node: SimNode, check_mode: bool = False) -> dict[str, Any]:
    run = harness.run_module(
        gpu_reset.main, {}, check_mode, run_command=node, get_bin_path=_which, expect=harness.FailJson
    )
    return run.result


def buses(node: SimNode) -> list[str]:
    return [str(g["pci_bus_id"]) for g in state.present_gpus(node.state())]


def test_persistence_off_first_then_every_gpu_reset_and_read_again(node: SimNode) -> None:
    """A built node runs in persistence mode: turned off on all 8, then one reset of all, then a read."""
    faults.inject(node.dir, "row-remap-pending")
    result, warnings = run_module(gpu_reset.main, {}, node)
    assert node.calls == [QUERY, APPS, [SMI, "-pm", "0", "-i", "0,1,2,3,4,5,6,7"], [SMI, "-r"], QUERY]
    assert warnings == [] and result["changed"] is True and result["step"] == "gpu_reset"
    assert result["persistence_off"] == buses(node)
    assert [(g["reset"], g["present"], g["message"]) for g in result["gpus"]] == [
        (True, True, "reset; persistence mode off")
    ] * 8
    assert all(g["persistence_mode"] is False for g in node.state()["gpus"])  # left off
    assert "gpu_power role turns it on again" in result["msg"]
    assert result["started"] <= result["ended"]
    assert node.state()["gpu_resets"][-1]["reset"] == buses(node)
    assert not node.state()["gpus"][2]["remapped_rows"]["pending"]  # what the reset was for


def test_persistence_already_off_is_not_touched(node: SimNode) -> None:
    node.persistence(False)
    result, _ = run_module(gpu_reset.main, {}, node)
    assert node.calls == [QUERY, APPS, [SMI, "-r"], QUERY]
    assert result["persistence_off"] == [] and "turned off on 8 first" not in result["msg"]


def test_a_gpu_in_use_refuses_the_reset_before_anything_changes(node: SimNode) -> None:
    present = state.present_gpus(node.state())
    config = vllm_engine.Config("m", "m", 1, 4096, 8, 8192, 0.9, True, 0.0)
    vllm_engine.Engine(node.dir, config, [str(present[3]["uuid"])]).claim_memory()
    result = failing(node)
    assert node.calls == [QUERY, APPS]  # nothing turned off, nothing reset
    bus = str(present[3]["pci_bus_id"])
    assert result["msg"].startswith(
        f"GPU reset refused, nothing reset: 1 GPU(s) in use by a process (GPU {bus}: "
    )
    assert list(result["in_use"]) == [bus] and result["changed"] is False
    assert all(g["persistence_mode"] for g in node.state()["gpus"])
    assert "gpu_resets" not in node.state()


def test_check_mode_reads_and_says_what_it_would_do(node: SimNode) -> None:
    result, _ = run_module(gpu_reset.main, {}, node, check_mode=True)
    assert node.calls == [QUERY, APPS]
    assert result["changed"] is True and result["msg"].startswith(
        "would turn persistence mode off on 8 GPU(s) and reset all 8 GPU(s)"
    )
    assert all(g["persistence_mode"] for g in node.state()["gpus"]) and "gpu_resets" not in node.state()


def test_a_gpu_off_the_bus_is_not_listed_and_the_others_are_reset(node: SimNode) -> None:
    faults.inject(node.dir, "xid-79")
    result, _ = run_module(gpu_reset.main, {}, node)
    assert len(result["gpus"]) == 7 and all(g["reset"] for g in result["gpus"])


class FakeSmi:
    """nvidia-smi answering from a table: argv tail -> (rc, stdout); the reads from the node's."""

    def __init__(self, node: SimNode, answers: dict[tuple[str, ...], tuple[int, str]]) -> None:
        self.node, self.answers, self.calls = node, answers, node.calls

    def __call__(self, module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        tail = tuple(args[1:])
        if tail in self.answers:
            self.calls.append(list(args))
            rc, out = self.answers[tail]
            return rc, out, ""
        return self.node(module, args, **kwargs)


def fake_failing(fake: FakeSmi) -> dict[str, Any]:
    return harness.run_module(
        gpu_reset.main, {}, run_command=fake, get_bin_path=_which, expect=harness.FailJson
    ).result


def test_the_reset_refused_fails_naming_each_gpu_and_the_tools_words(node: SimNode) -> None:
    """The simulator's own refusal (persistence back on between the two commands: a daemon restarted)."""
    on = buses(node)[:2]
    refusal = (
        f"The following GPUs could not be reset:\n  GPU {on[0]}: In use by another client\n"
        f"  GPU {on[1]}: In use by another client\n\n2 devices are currently being used by one or more other "
        "processes. Please first kill all processes using these devices and all compute applications running "
        "in the system.\n"
    )
    fake = FakeSmi(node, {("-r",): (255, refusal)})
    result = fake_failing(fake)
    assert result["msg"] == (
        f"GPU reset refused, nothing reset: {SMI} -r refused (rc=255): GPU {on[0]}: In use by another "
        f"client; GPU {on[1]}: In use by another client. 2 devices are currently being used by one or more "
        "other processes. Please first kill all processes using these devices and all compute applications "
        "running in the system."
    )
    assert result["rc"] == 255 and result["changed"] is True  # persistence was turned off
    assert [g["message"] for g in result["gpus"][:3]] == [
        "In use by another client",
        "In use by another client",
        "not reset: the tool refused",
    ]
    assert not any(g["reset"] for g in result["gpus"])


def test_persistence_that_cannot_be_turned_off_fails_before_the_reset(node: SimNode) -> None:
    pm = ("-pm", "0", "-i", "0,1,2,3,4,5,6,7")
    fake = FakeSmi(node, {pm: (4, "Insufficient Permissions\n")})
    result = fake_failing(fake)
    assert result["msg"] == (
        f"persistence mode could not be turned off, nothing reset: {SMI} -pm 0 -i 0,1,2,3,4,5,6,7 refused "
        "(rc=4): Insufficient Permissions"
    )
    assert [SMI, "-r"] not in node.calls and result["persistence_off"] == []


def test_a_gpu_the_tool_does_not_say_it_reset_fails_the_module(node: SimNode) -> None:
    node.persistence(False)
    first = buses(node)[0]
    fake = FakeSmi(node, {("-r",): (0, f"GPU {first} was successfully reset.\nAll done.\n")})
    result = fake_failing(fake)
    assert result["msg"].startswith(
        f"GPU reset incomplete: GPU {buses(node)[1]}: the tool did not say it reset this GPU"
    )
    assert [g["reset"] for g in result["gpus"]] == [True] + [False] * 7


def test_the_refusal_and_success_lines_are_read_as_the_tool_prints_them() -> None:
    assert reset_utils.refused_gpus(
        "The following GPUs could not be reset:\n  GPU 00000000:1B:00.0: In use by another client\n"
    ) == {"00000000:1B:00.0": "In use by another client"}
    assert reset_utils.reset_gpus("GPU 00000000:1A:00.0 was successfully reset.\nAll done.\n") == [
        "00000000:1A:00.0"
    ]
    assert reset_utils.bus_key("00000000:1B:00.0") == reset_utils.bus_key("0000:1b:00.0")
