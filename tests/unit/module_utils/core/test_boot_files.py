"""module_utils.core.boot_files: the roles' boot files as changes, from the node (drift) and from a
template/copy task's diff (provision's report), under the same names."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.core import boot_files

CONF = "/etc/gpufleet/gpu-power.conf"
UNIT_FILE = "/etc/systemd/system/gpufleet-gpu-power.service"
UNIT = "gpufleet-gpu-power.service"
GOOD = "a" * 64
EDITED = "b" * 64


def expected() -> list[dict[str, Any]]:
    return [
        {"path": CONF, "sha256": GOOD, "mode": "0644", "unit": None},
        {"path": UNIT_FILE, "sha256": GOOD, "mode": "0644", "unit": UNIT},
    ]


def node(conf: Any = "same", unit_file: Any = "same", enabled: bool | None = True) -> dict[str, Any]:
    def state(value: Any) -> Any:
        if value == "same":
            return {"sha256": GOOD, "mode": "0644"}
        return value

    units = {} if enabled is None else {UNIT: enabled}
    return {"files": {CONF: state(conf), UNIT_FILE: state(unit_file)}, "units": units}


def change(setting: str, frm: Any, to: Any) -> dict[str, Any]:
    return {"setting": setting, "from": frm, "to": to}


FILE = f"gpu_power.boot_file[{CONF}]"
UNIT_CONTENT = f"gpu_power.boot_file[{UNIT_FILE}]"


@pytest.mark.parametrize(
    ("found", "changes"),
    [
        pytest.param(node(), [], id="as-written"),
        pytest.param(node(conf=None), [change(FILE, None, "sha256:" + "a" * 16)], id="missing"),
        pytest.param(
            node(conf={"sha256": EDITED, "mode": "0644"}),
            [change(FILE, "sha256:" + "b" * 16, "sha256:" + "a" * 16)],
            id="edited",
        ),
        pytest.param(
            node(conf={"sha256": GOOD, "mode": "0600"}),
            [change(f"gpu_power.boot_file_mode[{CONF}]", "0600", "0644")],
            id="mode",
        ),
        pytest.param(
            # rewritten with its mode: one change, as the template task makes one
            node(conf={"sha256": EDITED, "mode": "0600"}),
            [change(FILE, "sha256:" + "b" * 16, "sha256:" + "a" * 16)],
            id="edited-and-mode",
        ),
        pytest.param(
            node(enabled=False),
            [change(f"gpu_power.boot_unit_enabled[{UNIT}]", False, True)],
            id="unit-disabled",
        ),
        pytest.param(
            # a run rewrites the unit and enables it: check mode and drift name both
            node(unit_file={"sha256": EDITED, "mode": "0644"}, enabled=False),
            [
                change(UNIT_CONTENT, "sha256:" + "b" * 16, "sha256:" + "a" * 16),
                change(f"gpu_power.boot_unit_enabled[{UNIT}]", False, True),
            ],
            id="unit-edited-and-disabled",
        ),
        pytest.param(
            node(unit_file=None, enabled=False),
            [
                change(UNIT_CONTENT, None, "sha256:" + "a" * 16),
                change(f"gpu_power.boot_unit_enabled[{UNIT}]", False, True),
            ],
            id="unit-missing",
        ),
        pytest.param(
            node(unit_file={"sha256": GOOD, "mode": "0755"}, enabled=False),
            [
                change(f"gpu_power.boot_file_mode[{UNIT_FILE}]", "0755", "0644"),
                change(f"gpu_power.boot_unit_enabled[{UNIT}]", False, True),
            ],
            id="unit-mode-and-disabled",
        ),
        pytest.param(
            node(conf=None, unit_file={"sha256": GOOD, "mode": "0600"}),
            [
                change(FILE, None, "sha256:" + "a" * 16),
                change(f"gpu_power.boot_file_mode[{UNIT_FILE}]", "0600", "0644"),
            ],
            id="in-order",
        ),
    ],
)
def test_compare(found: dict[str, Any], changes: list[dict[str, Any]]) -> None:
    assert boot_files.compare("gpu_power", expected(), found) == changes


@pytest.mark.parametrize(
    ("mode", "text"),
    [("0644", "0644"), ("644", "0644"), (0o100755, "0755"), ("04755", "04755"), (0o600, "0600")],
)
def test_mode_text_is_the_file_modules(mode: Any, text: str) -> None:
    assert boot_files.mode_text(mode) == text


@pytest.mark.parametrize(
    ("rc", "out", "enabled"),
    [
        (0, "enabled\n", True),
        (0, "static\n", True),
        (1, "disabled\n", False),
        (1, "", False),  # no unit file: systemctl says so on stderr
        (1, "masked\n", False),
        # exit 0, yet ansible.builtin.systemd_service enables them
        (0, "enabled-runtime\n", False),
        (0, "indirect\n", False),
        (0, "alias\n", False),
    ],
)
def test_unit_enabled_reads_is_enabled_as_the_role_does(rc: int, out: str, enabled: bool) -> None:
    assert boot_files.unit_enabled(rc, out) is enabled


def test_file_state(tmp_path: Path) -> None:
    path = tmp_path / "gpu-power.conf"
    assert boot_files.file_state(str(path)) is None
    path.write_bytes(b"GPU-1 1400.0\n")
    os.chmod(path, 0o600)
    assert boot_files.file_state(str(path)) == {
        "sha256": hashlib.sha256(b"GPU-1 1400.0\n").hexdigest(),
        "mode": "0600",
    }
    with pytest.raises(OSError, match="not a regular file"):
        boot_files.file_state(str(tmp_path))


class Node:
    """What boot_files uses of AnsibleModule: systemctl and sh answer from a table; argv recorded."""

    check_mode = False

    def __init__(self, enabled: dict[str, bool], sh_rc: int = 0) -> None:
        self.enabled = enabled
        self.sh_rc = sh_rc
        self.calls: list[list[str]] = []

    def get_bin_path(self, name: str, required: bool = False, opt_dirs: Any = None) -> str:
        return f"/usr/bin/{name}"

    def run_command(self, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        assert kwargs["environ_update"] == {"LC_ALL": "C"}
        if args[0] == "/usr/bin/sh":
            assert Path(args[2]).is_file()  # the new text, checked before it replaces the old file
            self.calls.append(args[:2])
            return self.sh_rc, "", "line 1: syntax error" if self.sh_rc else ""
        self.calls.append(list(args))
        if args[1] == "is-enabled":
            on = self.enabled.get(args[2], False)
            return (0 if on else 1), ("enabled\n" if on else "disabled\n"), ""
        if args[1] == "enable":
            self.enabled[args[2]] = True
        return 0, "", ""

    def atomic_move(self, src: str, dest: str) -> None:
        os.replace(src, dest)

    def fail_json(self, msg: str, **kwargs: Any) -> None:
        raise RuntimeError(msg)


SCRIPT = "/etc/gpufleet/x.sh"
IS_ENABLED = ["/usr/bin/systemctl", "is-enabled", UNIT]


def files() -> list[dict[str, Any]]:
    return [
        boot_files.boot_file(SCRIPT, "rc=0\n", script=True),
        boot_files.boot_file("/usr/local/sbin/x", "#!/bin/sh\n", mode="0755"),
        boot_files.boot_file(UNIT_FILE, "[Unit]\n", unit=UNIT),
    ]


def test_read_compare_write_then_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(boot_files, "ROOT", str(tmp_path))
    fake = Node({})
    found = boot_files.read(fake, files())
    assert fake.calls == [IS_ENABLED]
    assert found == {
        "files": {SCRIPT: None, "/usr/local/sbin/x": None, UNIT_FILE: None},
        "units": {UNIT: False},
    }
    assert [c["setting"] for c in boot_files.compare("r", files(), found)] == [
        f"r.boot_file[{SCRIPT}]",
        "r.boot_file[/usr/local/sbin/x]",
        f"r.boot_file[{UNIT_FILE}]",
        f"r.boot_unit_enabled[{UNIT}]",
    ]
    fake.calls.clear()
    boot_files.write(fake, files(), found)
    assert fake.calls == [
        ["/usr/bin/sh", "-n"],
        ["/usr/bin/systemctl", "daemon-reload"],
        ["/usr/bin/systemctl", "enable", UNIT],
    ]
    assert (tmp_path / "usr/local/sbin/x").stat().st_mode & 0o7777 == 0o755
    assert (tmp_path / SCRIPT.lstrip("/")).read_text() == "rc=0\n"
    fake.calls.clear()
    again = boot_files.read(fake, files())
    assert boot_files.compare("r", files(), again) == [] and fake.calls == [IS_ENABLED]
    fake.calls.clear()
    boot_files.write(fake, files(), again)
    assert fake.calls == []


def test_a_mode_is_set_alone_and_a_bad_script_replaces_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(boot_files, "ROOT", str(tmp_path))
    fake = Node({UNIT: True})
    boot_files.write(fake, files(), boot_files.read(fake, files()))
    (tmp_path / UNIT_FILE.lstrip("/")).chmod(0o600)
    (tmp_path / SCRIPT.lstrip("/")).write_text("edited\n")
    found = boot_files.read(fake, files())
    assert boot_files.compare("r", files(), found) == [
        change(f"r.boot_file[{SCRIPT}]", sha("edited\n"), sha("rc=0\n")),
        change(f"r.boot_file_mode[{UNIT_FILE}]", "0600", "0644"),
    ]
    fake.calls.clear()
    fake.sh_rc = 2
    with pytest.raises(
        RuntimeError, match=r"does not parse .sh -n: line 1: syntax error.; the old file was left"
    ):
        boot_files.write(fake, files(), found)
    assert (tmp_path / SCRIPT.lstrip("/")).read_text() == "edited\n"
    assert [p.name for p in (tmp_path / "etc/gpufleet").iterdir()] == ["x.sh"]  # no temporary left
    fake.sh_rc = 0
    boot_files.write(fake, files(), found)
    assert (tmp_path / UNIT_FILE.lstrip("/")).stat().st_mode & 0o777 == 0o644
    assert fake.calls[-1] == ["/usr/bin/sh", "-n"]  # a mode alone reloads and enables nothing


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def test_header_names_the_module() -> None:
    assert boot_files.header("gpu_power") == "# managed by gpufleet.node.gpu_power; edits are overwritten\n"
