"""The simulated systemd's unit handling: templates, specifiers, environments, conditions."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpufleet_sim.tools import systemd_service as service
from gpufleet_sim.tools import systemd_units as units

TEMPLATE = """[Unit]
Description=vLLM instance %i
ConditionPathExists=/run/gate/%i.passed
AssertPathIsDirectory={etc}

[Service]
Type=simple
Environment="MODE=fast lane" PORT=8000
EnvironmentFile={etc}/%i.env
EnvironmentFile=-{etc}/missing.env
ExecStart=/usr/local/bin/vllm serve ${{MODEL}} --port ${{PORT}} $EXTRA --name %n
TimeoutStopSec=30s
"""


@pytest.fixture
def unit_dir(tmp_path: Path) -> Path:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "glm52.env").write_text(
        '# written by gpu_pinning\nCUDA_VISIBLE_DEVICES="GPU-a,GPU-b"\nMODEL=zai/GLM\n'
        "EXTRA=--trust-remote-code --swap-space 8\nPORT=8001\nnot a line\nexport X=1\n",
        encoding="utf-8",
    )
    (tmp_path / "vllm@.service").write_text(TEMPLATE.format(etc=etc), encoding="utf-8")
    return tmp_path


def test_an_instance_uses_its_template_with_specifiers(unit_dir: Path) -> None:
    dirs = (unit_dir,)
    assert units.template_of("vllm@glm52") == "vllm@.service" and units.template_of("vllm.service") is None
    path = units.find("vllm@glm52.service", dirs)
    assert path == unit_dir / "vllm@.service"
    unit = units.load("vllm@glm52.service", path)
    assert units.value(unit, "Unit", "Description") == "vLLM instance glm52"
    assert units.value(unit, "Unit", "ConditionPathExists") == "/run/gate/glm52.passed"
    assert units.find("nothing@x.service", dirs) is None


def test_environment_files_override_environment_and_expand_in_exec(unit_dir: Path) -> None:
    unit = units.load("vllm@glm52.service", unit_dir / "vllm@.service")
    env = units.environment(unit)
    assert env["MODE"] == "fast lane" and env["PORT"] == "8001"  # the file wins over Environment=
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-a,GPU-b" and "X" not in env and "not a line" not in env
    assert env["PATH"] == units.BASE_ENV["PATH"]
    argv = units.expand_argv(units.exec_lines(unit, "ExecStart")[0][1], env)
    assert argv == [
        "/usr/local/bin/vllm",
        "serve",
        "zai/GLM",
        "--port",
        "8001",
        "--trust-remote-code",
        "--swap-space",
        "8",
        "--name",
        "vllm@glm52.service",
    ]
    assert service.stop_timeout(unit) == 30.0


def test_a_missing_environment_file_fails_unless_optional(tmp_path: Path) -> None:
    unit: units.Unit = {"Service": {"EnvironmentFile": [f"-{tmp_path}/none"]}}
    assert units.environment(unit) == units.BASE_ENV
    with pytest.raises(FileNotFoundError, match="Failed to load environment files"):
        units.environment({"Service": {"EnvironmentFile": [f"{tmp_path}/none"]}})


def test_conditions_skip_and_asserts_fail(tmp_path: Path) -> None:
    marker = tmp_path / "gate-passed"
    unit: units.Unit = {
        "Unit": {"ConditionPathExists": [str(marker)], "AssertPathIsDirectory": [str(tmp_path)]}
    }
    assert not units.conditions_hold(unit) and units.asserts_hold(unit)
    marker.write_text("", encoding="utf-8")
    assert units.conditions_hold(unit)
    assert not units.conditions_hold({"Unit": {"ConditionPathExists": [f"!{marker}"]}})
    assert not units.conditions_hold({"Unit": {"ConditionFileNotEmpty": [str(marker)]}})
    assert not units.asserts_hold({"Unit": {"AssertPathExists": [str(tmp_path / "none")]}})
    assert units.conditions_hold({"Unit": {"ConditionVirtualization": ["!container"]}})  # not modelled: holds


def test_a_process_is_alive_only_with_its_own_start_time() -> None:
    import os

    pid = os.getpid()
    started = service.start_time(pid)
    assert started is not None and service.alive(pid, started)
    assert not service.alive(pid, started + 1)  # a reused pid is someone else
    assert not service.alive(None, None)
    assert service.active_state({"active": False, "result": "failed"}) == "failed"
    assert service.active_state({"active": True, "pid": pid, "pid_start": started}) == "active"
    assert service.active_state({"active": True, "pid": 999999999, "pid_start": 1}) == "failed"
