"""guardian_settings: each guardian setting's default and range from the inventory's host variables, every
refusal at once (setting, node, value, what is allowed: exit 2), gpu_reset only for the classes NVIDIA's
catalog says a reset clears, and one set of breaker settings for the fleet."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet import preflight, quarantine
from gpufleet.guardian_settings import (
    GPU_RESET_CLASSES,
    INTEGERS,
    BreakerSettings,
    GuardianSettings,
    SettingsError,
    fleet_breaker,
    settings_for,
)


def test_defaults_when_nothing_is_set() -> None:
    found = settings_for({"gpu-01": {"ansible_host": "10.0.0.1"}})["gpu-01"]
    assert found == GuardianSettings()
    assert found.remediation == {}
    assert (found.escalate_after, found.escalate_window_h) == (2, 168)
    assert found.breaker == BreakerSettings(max_nodes=2, max_percent=10.0, window_min=60)
    assert (found.reboot_graceful_timeout_s, found.reboot_boot_timeout_s) == (300, 900)
    assert found.remediation_for("xid") == ""


@pytest.mark.parametrize("bounded", INTEGERS, ids=lambda b: b.name)
def test_each_integer_setting_takes_its_ends_and_refuses_past_them(bounded: Any) -> None:
    for good in (bounded.low, bounded.high):
        settings_for({"gpu-01": {bounded.name: good}})
    for bad in (bounded.low - 1, bounded.high + 1):
        with pytest.raises(SettingsError) as refused:
            settings_for({"gpu-01": {bounded.name: bad}})
        message = str(refused.value)
        assert bounded.name in message and "gpu-01" in message and str(bad) in message
        assert f"{bounded.low}..{bounded.high}" in message
        assert f"default {bounded.default}" in message


@pytest.mark.parametrize("value", [True, "two", 2.5, [2], "{{ escalate }}"])
def test_an_integer_setting_refuses_what_is_not_an_integer(value: Any) -> None:
    with pytest.raises(SettingsError, match="guardian_escalate_after is"):
        settings_for({"gpu-01": {"guardian_escalate_after": value}})


def test_a_template_is_named_as_not_rendered() -> None:
    with pytest.raises(SettingsError, match="Jinja template is not rendered"):
        settings_for({"gpu-01": {"guardian_breaker_window_min": "{{ window }}"}})


def test_an_ini_inventorys_digits_are_an_integer() -> None:
    assert settings_for({"gpu-01": {"guardian_escalate_after": "3"}})["gpu-01"].escalate_after == 3


@pytest.mark.parametrize(("value", "ok"), [(0, True), (100, True), (12.5, True), (-1, False), (100.5, False)])
def test_breaker_percent_range(value: float, ok: bool) -> None:
    hostvars = {"gpu-01": {"guardian_breaker_max_percent": value}}
    if ok:
        assert settings_for(hostvars)["gpu-01"].breaker_max_percent == value
    else:
        with pytest.raises(
            SettingsError, match=r"guardian_breaker_max_percent is .* allowed a number 0..100"
        ):
            settings_for(hostvars)


def test_remediation_per_class() -> None:
    found = settings_for(
        {"gpu-01": {"guardian_remediation": {"row_remap": "gpu_reset", "gpu_lost": "reboot"}}}
    )["gpu-01"]
    assert found.remediation_for("row_remap") == "gpu_reset"
    assert found.remediation_for("gpu_lost") == "reboot"
    assert found.remediation_for("nvlink") == ""


@pytest.mark.parametrize("cls", GPU_RESET_CLASSES)
def test_gpu_reset_allowed_for_the_classes_a_reset_clears(cls: str) -> None:
    assert settings_for({"n": {"guardian_remediation": {cls: "gpu_reset"}}})["n"].remediation_for(cls) == (
        "gpu_reset"
    )


@pytest.mark.parametrize(
    "cls", [c.name for c in quarantine.UNSAFE if c.name not in GPU_RESET_CLASSES], ids=str
)
def test_gpu_reset_refused_for_other_classes_reboot_allowed(cls: str) -> None:
    with pytest.raises(SettingsError) as refused:
        settings_for({"gpu-02": {"guardian_remediation": {cls: "gpu_reset"}}})
    assert f"guardian_remediation[{cls}] is 'gpu_reset' on gpu-02" in str(refused.value)
    assert "a GPU reset clears only row_remap, xid, recovery_action, ecc_uncorrectable" in str(refused.value)
    assert (
        settings_for({"n": {"guardian_remediation": {cls: "reboot"}}})["n"].remediation_for(cls) == "reboot"
    )


def test_remediation_key_must_be_an_unsafe_class() -> None:
    with pytest.raises(SettingsError) as refused:
        settings_for({"gpu-01": {"guardian_remediation": {"power_cap": "reboot"}}})
    assert "guardian_remediation key is 'power_cap' on gpu-01" in str(refused.value)
    assert "gpu_lost, xid, recovery_action" in str(refused.value)


@pytest.mark.parametrize("value", [["xid"], "reboot", {"xid": "reset"}, {"xid": None}])
def test_remediation_shape_and_actions_refused(value: Any) -> None:
    with pytest.raises(SettingsError, match="guardian_remediation"):
        settings_for({"gpu-01": {"guardian_remediation": value}})


def test_every_refusal_at_once_and_shared_ones_said_once() -> None:
    hostvars: dict[str, dict[str, Any]] = {
        f"gpu-{n:02d}": {"guardian_escalate_after": 0, "guardian_reboot_boot_timeout_s": 10} for n in range(6)
    }
    hostvars["gpu-03"]["guardian_remediation"] = {"thermal": "gpu_reset"}
    with pytest.raises(SettingsError) as refused:
        settings_for(hostvars)
    problems = refused.value.problems
    assert len(problems) == 3
    assert problems[0] == (
        "guardian_escalate_after is 0 on gpu-00, gpu-01, gpu-02, gpu-03 and 2 more: allowed an integer "
        "1..10 (default 2)"
    )
    assert any(p.startswith("guardian_reboot_boot_timeout_s is 10 on gpu-00") for p in problems)
    assert any(p.startswith("guardian_remediation[thermal] is 'gpu_reset' on gpu-03:") for p in problems)
    # the CLI's exit 2
    assert isinstance(refused.value, preflight.ConfigError)


def test_fleet_breaker_one_set_for_the_fleet() -> None:
    same = settings_for({"a": {"guardian_breaker_max_nodes": 3}, "b": {"guardian_breaker_max_nodes": 3}})
    assert fleet_breaker(same) == BreakerSettings(3, 10.0, 60)
    assert fleet_breaker({}) == BreakerSettings()
    differ = settings_for({"a": {"guardian_breaker_max_nodes": 3}, "b": {}})
    with pytest.raises(SettingsError) as refused:
        fleet_breaker(differ)
    assert "max_nodes 3, max_percent 10, window_min 60 on a" in str(refused.value)
    assert "max_nodes 2, max_percent 10, window_min 60 on b" in str(refused.value)
    assert "group_vars/all" in str(refused.value)
