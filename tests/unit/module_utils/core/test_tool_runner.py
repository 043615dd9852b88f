"""module_utils.core.tool_runner: path lookup, the C locale, and the messages a failed tool leaves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner


class Failed(Exception):
    pass


class FakeModule:
    """Records run_command calls and answers from a table; fail_json raises Failed(kwargs)."""

    def __init__(self, answers: dict[tuple[str, ...], tuple[int, str, str]], on_path: dict[str, str]) -> None:
        self.answers = answers
        self.on_path = on_path
        self.calls: list[tuple[list[str], dict[str, str]]] = []

    def get_bin_path(self, name: str) -> str | None:
        return self.on_path.get(name)

    def run_command(self, cmd: list[str], environ_update: dict[str, str]) -> tuple[int, str, str]:
        self.calls.append((cmd, environ_update))
        return self.answers[tuple(cmd)]

    def fail_json(self, **kwargs: Any) -> None:
        raise Failed(kwargs)


def test_first_line_skips_blank_lines_and_empty_texts() -> None:
    assert tool_runner.first_line("", None, "\n  \n  Unable to determine the device handle  \nmore") == (
        "Unable to determine the device handle"
    )
    assert tool_runner.first_line(None, "") == "no output"


def test_tool_path_takes_the_first_installed_alternative() -> None:
    module = FakeModule({}, {"mstconfig": "/usr/bin/mstconfig"})
    assert tool_runner.tool_path(module, "mlxconfig", "mstconfig") == "/usr/bin/mstconfig"
    assert tool_runner.tool_path(module, "mlxlink", required=False) is None


def test_a_missing_required_tool_names_every_alternative() -> None:
    with pytest.raises(Failed, match="mlxconfig or mstconfig is not installed on this node"):
        tool_runner.tool_path(FakeModule({}, {}), "mlxconfig", "mstconfig")


def test_nvidia_smi_path_must_be_an_executable_file(tmp_path: Path) -> None:
    module = FakeModule({}, {"nvidia-smi": "/usr/bin/nvidia-smi"})
    assert tool_runner.nvidia_smi(module) == "/usr/bin/nvidia-smi"
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(Failed, match=f"nvidia_smi_path {script} is not an executable file"):
        tool_runner.nvidia_smi(module, str(script))
    script.chmod(0o755)
    assert tool_runner.nvidia_smi(module, str(script)) == str(script)


def test_run_uses_the_c_locale_and_a_failure_carries_command_output_and_hint() -> None:
    cmd = ["/usr/bin/nvidia-smi", "-i", "GPU-1", "-pl", "1400"]
    module = FakeModule({tuple(cmd): (4, "", "\nInsufficient Permissions\n")}, {})
    with pytest.raises(Failed) as failed:
        tool_runner.run(module, cmd, "Run it as root.", changes=["a"])
    result = failed.value.args[0]
    assert result["msg"] == (
        "/usr/bin/nvidia-smi -i GPU-1 -pl 1400 failed (rc=4): Insufficient Permissions. Run it as root."
    )
    assert (result["cmd"], result["rc"], result["stderr"], result["changes"]) == (
        cmd,
        4,
        "\nInsufficient Permissions\n",
        ["a"],
    )
    assert module.calls == [(cmd, {"LC_ALL": "C"})]
    assert tool_runner.run(module, cmd, check=False) == (4, "", "\nInsufficient Permissions\n")


def test_run_parsed_fails_on_output_the_parser_cannot_read() -> None:
    cmd = ["/usr/bin/mlnx_qos", "-i", "ens1np0"]
    module = FakeModule({tuple(cmd): (0, "garbage\n", "")}, {})

    def parser(text: str) -> int:
        if not text.startswith("DCBX"):
            raise ValueError("no 'DCBX mode' line")
        return 1

    with pytest.raises(
        Failed, match=r"Could not read the output of /usr/bin/mlnx_qos -i ens1np0: no 'DCBX mode' line"
    ):
        tool_runner.run_parsed(module, cmd, parser)
    module.answers[tuple(cmd)] = (0, "DCBX mode: OS controlled\n", "")
    assert tool_runner.run_parsed(module, cmd, parser) == 1


def test_a_read_that_comes_back_empty_with_rc_0_is_read_again_and_an_error_is_not() -> None:
    answers = iter([(0, "", ""), (0, "", ""), (0, "835\n", "")])
    calls: list[list[str]] = []

    def run_command(cmd: list[str], **kwargs: object) -> tuple[int, str, str]:
        calls.append(cmd)
        return next(answers)

    assert tool_runner.read_command(run_command, ["nvidia-smi", "-q"]) == (0, "835\n", "")
    assert len(calls) == 3
    calls.clear()
    assert tool_runner.read_command(lambda cmd, **kw: (calls.append(cmd), (9, "", ""))[1], ["x"]) == (
        9,
        "",
        "",
    )
    assert len(calls) == 1


def test_a_failure_keeps_a_bounded_part_of_a_runaway_output() -> None:
    """A tool that prints 2 MiB (one line) fails the module with a message of one sentence and at most
    OUTPUT_KEPT characters of each stream: a result that size would reach the controller empty."""
    cmd = ["/usr/bin/nvidia-smi", "-q", "-x"]
    huge = "<product_name>" + "X" * (2 * 1024 * 1024)
    module = FakeModule({tuple(cmd): (3, huge, huge)}, {})
    with pytest.raises(Failed) as failed:
        tool_runner.run(module, cmd)
    result = failed.value.args[0]
    assert result["msg"] == (
        f"/usr/bin/nvidia-smi -q -x failed (rc=3): <product_name>{'X' * (tool_runner.LINE_KEPT - 14)}... "
        f"(a line of {len(huge)} characters)."
    )
    for stream in ("stdout", "stderr"):
        cut = len(huge) - tool_runner.OUTPUT_KEPT
        assert result[stream] == f"{huge[: tool_runner.OUTPUT_KEPT]}\n[... {cut} more characters not kept]"
    assert len(str(result)) < 3 * tool_runner.OUTPUT_KEPT


def test_output_the_parser_refuses_is_kept_bounded_and_short_output_whole() -> None:
    cmd = ["/usr/bin/mlxlink", "-d", "mlx5_0"]
    module = FakeModule({tuple(cmd): (0, "Y" * 100_000, "")}, {})

    def parser(text: str) -> int:
        raise ValueError("mlxlink: no 'State' line")

    with pytest.raises(Failed) as failed:
        tool_runner.run_parsed(module, cmd, parser)
    assert failed.value.args[0]["stdout"].endswith(f"[... {100_000 - 16384} more characters not kept]")
    assert (tool_runner.kept("short\n"), tool_runner.kept(None)) == ("short\n", None)
    assert tool_runner.kept("x" * tool_runner.OUTPUT_KEPT) == "x" * tool_runner.OUTPUT_KEPT
