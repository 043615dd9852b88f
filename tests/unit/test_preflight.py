"""Configuration errors are found before the first play: exit 2, nothing run, the message names the
setting. (Nothing here reaches a node: every case stops in the preflight.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from ansible.parsing.vault import VaultLib, VaultSecret

from gpufleet import cli, preflight, runner

NODE01 = "all:\n  children:\n    gpu_nodes:\n      hosts:\n        node01: {}\n"


def _vaulted_inventory(tmp_path: Path, password: bytes) -> Path:
    ciphertext = VaultLib([("default", VaultSecret(password))]).encrypt("hunter2").decode()
    text = yaml.safe_dump(
        {
            "all": {
                "children": {"gpu_nodes": {"hosts": {"node01": {"ansible_host": "127.0.0.1"}}}},
                "vars": {"gpufleet_bmc_password": "X"},
            }
        }
    ).replace(
        "gpufleet_bmc_password: X",
        "gpufleet_bmc_password: !vault |\n      " + ciphertext.replace("\n", "\n      "),
    )
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    return path


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> list[runner.RunOptions]:
    """Any playbook run is recorded (and none should happen)."""
    runs: list[runner.RunOptions] = []

    def record(options: runner.RunOptions, progress: object = None) -> runner.RunResult:
        runs.append(options)
        return runner.RunResult(rc=0, status="successful", hosts={})

    monkeypatch.setattr(runner, "run_playbook", record)
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)
    return runs


def test_a_report_dir_that_is_a_file_or_cannot_be_made_is_refused(tmp_path: Path) -> None:
    afile = tmp_path / "report"
    afile.write_text("")
    with pytest.raises(preflight.ConfigError, match=f"--report-dir {afile} is a file"):
        preflight.report_dir(afile)
    with pytest.raises(preflight.ConfigError, match="cannot be written"):
        preflight.report_dir(afile / "below")
    preflight.report_dir(tmp_path / "new" / "dir")
    assert (tmp_path / "new" / "dir").is_dir()


def test_a_textfile_dir_must_exist_already(tmp_path: Path) -> None:
    """node_exporter reads one directory: one gpufleet would create is a typo it never reads."""
    missing = tmp_path / "node-exporter"
    with pytest.raises(preflight.ConfigError, match=f"--textfile-dir {missing} does not exist"):
        preflight.report_dir(missing, "--textfile-dir", create=False)
    assert not missing.exists()
    missing.mkdir()
    preflight.report_dir(missing, "--textfile-dir", create=False)


def test_a_malformed_inventory_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "hosts.yml"
    bad.write_text("all:\n  hosts:\n    node01: [\n")
    with pytest.raises(preflight.ConfigError, match=f"inventory {bad} could not be read: .*YAML"):
        preflight.read_inventory(bad)


def test_vaulted_variables_need_the_right_secret(tmp_path: Path) -> None:
    listed = preflight.read_inventory(_vaulted_inventory(tmp_path, b"right"))
    assert [(v.host, v.variable) for v in preflight.vaulted(listed)] == [("node01", "gpufleet_bmc_password")]
    with pytest.raises(preflight.ConfigError, match=r"gpufleet_bmc_password .*--vault-password-file FILE"):
        preflight.vault_secrets(listed, None)
    wrong = tmp_path / "wrong"
    wrong.write_text("wrong\n")
    with pytest.raises(preflight.ConfigError, match="node01: gpufleet_bmc_password does not decrypt"):
        preflight.vault_secrets(listed, wrong)
    right = tmp_path / "right"
    right.write_text("right\n")
    preflight.vault_secrets(listed, right)
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\necho right\n")
    script.chmod(0o755)
    preflight.vault_secrets(listed, script)


@pytest.mark.parametrize("label", [None, "prod"])
def test_a_secret_opens_a_vaulted_value_exactly_when_ansible_core_decrypts_it(label: str | None) -> None:
    """preflight's own HMAC check (1.1 values) and ansible-core's vault (labelled 1.2 ones) agree with
    ansible-core's decrypt on the right secret, wrong ones, and a value cut short or altered."""
    vault = VaultLib([(label or "default", VaultSecret(b"right"))])
    value = vault.encrypt("hunter2", vault_id=label).decode()
    assert value.startswith("$ANSIBLE_VAULT;1.2;AES256;prod\n" if label else "$ANSIBLE_VAULT;1.1;AES256\n")
    header, _, body = value.partition("\n")
    flipped = body[:-2] + ("0" if body[-2] != "0" else "1") + body[-1]
    for secret, text, opens in [
        (b"right", value, True),
        (b"right", value + "\n", True),
        (b"right", "  " + value.replace("\n", "\n  "), False),  # ansible-core does not strip it either
        (b"wrong", value, False),
        (b"righ", value, False),
        (b"right", f"{header}\n{flipped}", False),
        (b"right", f"{header}\n{body[: len(body) // 2]}", False),
    ]:
        assert preflight._opens(secret, text) is opens, (secret, text[:60])
        try:
            VaultLib([("default", VaultSecret(secret))]).decrypt(text)
        except Exception:
            assert not opens
        else:
            assert opens


def test_ansible_vault_password_file_is_honoured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(tmp_path / "pw"))
    assert preflight.vault_file(None) == tmp_path / "pw"
    assert preflight.vault_file(Path("given")) == Path("given")


def test_gate_on_a_vaulted_inventory_without_a_secret_is_exit_2_before_any_run(
    tmp_path: Path, no_run: list[runner.RunOptions], capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = _vaulted_inventory(tmp_path, b"right")
    code = cli.main(["gate", "--inventory", str(inventory), "--report-dir", str(tmp_path / "r")])
    assert code == 2 and no_run == []
    assert "gpufleet_bmc_password" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["facts", "provision", "check", "drift", "gate"])
def test_every_command_refuses_a_malformed_inventory(
    command: str, tmp_path: Path, no_run: list[runner.RunOptions], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "hosts.yml"
    bad.write_text("all: {hosts: [\n")
    assert cli.main([command, "--inventory", str(bad), "--report-dir", str(tmp_path / "r")]) == 2
    assert no_run == []
    assert f"inventory {bad} could not be read" in capsys.readouterr().err


def test_provision_with_an_unknown_tag_is_exit_2(
    tmp_path: Path, no_run: list[runner.RunOptions], capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(NODE01)
    argv = ["provision", "--inventory", str(inventory), "--report-dir", str(tmp_path / "r"), "--tags"]
    assert cli.main([*argv, "rdma_qos,nosuchrole"]) == 2
    assert no_run == []
    assert "--tags nosuchrole: not a tag of provision.yml" in capsys.readouterr().err
    assert cli.main([*argv, "rdma_qos"]) == 0
    assert [r.tags for r in no_run] == ["rdma_qos"]


def test_a_report_dir_that_is_a_file_is_exit_2_before_any_run(
    tmp_path: Path, no_run: list[runner.RunOptions]
) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    node01: {}\n")
    (tmp_path / "r").write_text("")
    assert (
        cli.main(["drift", "--fix", "--inventory", str(inventory), "--report-dir", str(tmp_path / "r")]) == 2
    )
    assert no_run == []


NESTED = """
all:
  children:
    gpu_nodes:
      children:
        rack7:
          hosts:
            node01: {ansible_host: 10.0.0.1}
    leaf_switches:
      hosts:
        leaf01: {gpufleet_switch_address: 10.0.1.1}
    lab:
      hosts:
        stray: {}
"""


def test_the_fleet_groups_are_read_through_child_groups(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(NESTED)
    listed = preflight.read_inventory(inventory)
    assert preflight.group_members(listed, "gpu_nodes") == {"node01"}
    assert preflight.group_members(listed, "leaf_switches") == {"leaf01"}
    for playbook in ("facts.yml", "drift.yml", "switch_qos.yml", "post_maintenance.yml"):
        preflight.run_on(listed, playbook, inventory, None)
    # drift of the leaves alone reads them; facts of a leaf reaches nothing
    leaf = preflight.read_inventory(inventory, "leaf01")
    preflight.run_on(leaf, "drift.yml", inventory, "leaf01")
    with pytest.raises(preflight.ConfigError, match="no host in group gpu_nodes within --limit leaf01"):
        preflight.run_on(leaf, "facts.yml", inventory, "leaf01")
    with pytest.raises(preflight.ConfigError, match="no host in group leaf_switches within --limit node01"):
        preflight.run_on(preflight.read_inventory(inventory, "node01"), "switch_qos.yml", inventory, "node01")


GARBAGE = {
    # the ini plugin reads any word as a host name: a text file parses into ungrouped hosts
    "a text file": ("notes.txt", "garbage\nfoo bar=1\n", "its hosts: foo, garbage"),
    "hosts outside the fleet groups": ("hosts.yml", "all:\n  hosts:\n    node01: {}\n", "its hosts: node01"),
    "another group": ("hosts.yml", "all:\n  children:\n    gpus:\n      hosts:\n        n1: {}\n", "n1"),
}


# each case is refused by drift; each command refuses one case (ansible-inventory takes ~2 s a run)
CASES = [("drift", case) for case in sorted(GARBAGE)] + [
    (command, "hosts outside the fleet groups") for command in ("facts", "gate", "switch")
]


@pytest.mark.parametrize(("command", "case"), CASES)
def test_an_inventory_without_gpu_nodes_or_leaf_switches_is_exit_2_naming_them(
    command: str,
    case: str,
    tmp_path: Path,
    no_run: list[runner.RunOptions],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, text, hosts = GARBAGE[case]
    inventory = tmp_path / name
    inventory.write_text(text)
    argv = [command, "--inventory", str(inventory), "--report-dir", str(tmp_path / "r")]
    assert cli.main([*argv, *(["--limit", "all"] if command == "switch" else [])]) == 2
    assert no_run == []
    err = capsys.readouterr().err
    assert f"inventory {inventory} has no host in group" in err
    assert hosts in err
    assert "gpu_nodes" in err and "leaf_switches" in err


@pytest.mark.parametrize("name", ["report.json", "report.html.tmp"])
def test_a_report_file_that_is_a_directory_is_exit_2_before_any_run(
    name: str, tmp_path: Path, no_run: list[runner.RunOptions], capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(NODE01)
    (tmp_path / "r" / name).mkdir(parents=True)
    assert cli.main(["drift", "--inventory", str(inventory), "--report-dir", str(tmp_path / "r")]) == 2
    assert no_run == []
    assert f"--report-dir {tmp_path / 'r'}: {name} in it is a directory" in capsys.readouterr().err


def test_a_textfile_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "gpufleet_watch.prom").mkdir()
    with pytest.raises(
        preflight.ConfigError, match=r"--textfile-dir .*gpufleet_watch\.prom in it is a directory"
    ):
        preflight.report_dir(tmp_path, "--textfile-dir", create=False, files=["gpufleet_watch.prom"])
    preflight.report_dir(tmp_path, "--textfile-dir", create=False, files=["gpufleet_drift.prom"])


def _gone(pid: int) -> bool:
    """Whether a process has exited (a zombie left to its new parent counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_hanging_vault_script_is_stopped_with_its_child_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = preflight.read_inventory(_vaulted_inventory(tmp_path, b"right"))
    script = tmp_path / "vault-pass.sh"
    script.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {tmp_path / 'child'}\nsleep 300\n")
    script.chmod(0o755)
    monkeypatch.setattr(preflight, "VAULT_SCRIPT_TIMEOUT_S", 1.0)
    started = time.monotonic()
    with pytest.raises(
        preflight.ConfigError, match=f"vault password script {script} did not finish within 1 s"
    ):
        preflight.vault_secrets(listed, script)
    assert time.monotonic() - started < 10
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child), f"the script's child {child} was left running"


def test_a_vault_script_that_prints_the_password_is_used(tmp_path: Path) -> None:
    listed = preflight.read_inventory(_vaulted_inventory(tmp_path, b"right"))
    script = tmp_path / "vault-pass.sh"
    script.write_text("#!/bin/sh\necho right\n")
    script.chmod(0o755)
    preflight.vault_secrets(listed, script)
    script.write_text("#!/bin/sh\necho wrong\n")
    with pytest.raises(preflight.ConfigError, match="does not decrypt"):
        preflight.vault_secrets(listed, script)
    script.write_text("#!/bin/sh\nexit 3\n")
    with pytest.raises(preflight.ConfigError, match=r"vault password script .* failed \(rc=3\)"):
        preflight.vault_secrets(listed, script)


def test_a_directory_given_as_the_vault_file_is_named_a_directory(
    tmp_path: Path, no_run: list[runner.RunOptions], capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = _vaulted_inventory(tmp_path, b"right")
    argv = ["drift", "--inventory", str(inventory), "--report-dir", str(tmp_path / "r")]
    assert cli.main([*argv, "--vault-password-file", str(tmp_path)]) == 2
    assert f"--vault-password-file {tmp_path} is a directory" in capsys.readouterr().err
    assert cli.main([*argv, "--vault-password-file", str(tmp_path / "missing")]) == 2
    assert f"--vault-password-file {tmp_path / 'missing'} does not exist" in capsys.readouterr().err
    assert no_run == []


CABLED = """
all:
  children:
    gpu_nodes:
      hosts:
        node01:
          fabric_cabling: {mlx5_0: "leaf01:swp1", mlx5_1: "leaf09:swp1", mlx5_2: "{{ x }}:swp2"}
        node02:
          fabric_cabling: {mlx5_0: "leaf01:swp2"}
    leaf_switches:
      hosts:
        leaf01: {gpufleet_switch_address: 10.0.1.1}
"""


@pytest.mark.parametrize("command", ["provision", "drift", "gate"])
def test_a_cabling_plan_naming_a_leaf_outside_the_inventory_is_exit_2_before_any_run(
    command: str, tmp_path: Path, no_run: list[runner.RunOptions], capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(CABLED)
    argv = [command, "--inventory", str(inventory), "--report-dir", str(tmp_path / "r"), "--limit", "node01"]
    assert cli.main(argv) == 2
    assert no_run == []
    err = capsys.readouterr().err
    assert "node01: fabric_cabling[mlx5_1] is leaf09:swp1, and leaf09 is not in leaf_switches" in err
    assert "its leaves: leaf01" in err and "node02" not in err


def test_a_cabling_plan_of_the_inventory_s_leaves_passes(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(CABLED.replace("leaf09", "leaf01"))
    preflight.cabling_leaves(preflight.read_inventory(inventory))


def test_an_inventory_that_manages_no_leaf_holds_no_plan_against_its_leaves(tmp_path: Path) -> None:
    """No leaf_switches group at all: a network team's leaves, judged by LLDP alone (test_fabric's
    burn-in case); the plan is not refused."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(CABLED.split("    leaf_switches:")[0])
    preflight.cabling_leaves(preflight.read_inventory(inventory))


@pytest.mark.parametrize(
    "settings",
    [{"ANSIBLE_VERBOSITY": "4"}, {"ANSIBLE_DEBUG": "1"}, {"ANSIBLE_DEBUG": "true", "ANSIBLE_VERBOSITY": "3"}],
    ids=["verbosity 4", "debug", "both"],
)
def test_the_user_s_ansible_verbosity_or_debug_does_not_break_what_gpufleet_parses(
    settings: dict[str, str],
    tmp_path: Path,
    no_run: list[runner.RunOptions],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ansible-inventory --list's JSON and ansible-playbook --list-tags' tags are read as they are
    without them (both tools print banners or a debug trace on stdout with them)."""
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(NODE01)
    assert sorted(preflight.hosts(preflight.read_inventory(inventory))) == ["node01"]
    argv = ["provision", "--inventory", str(inventory), "--report-dir", str(tmp_path / "r"), "--tags"]
    assert cli.main([*argv, "rdma_qos"]) == 0, capsys.readouterr().err
    assert [r.tags for r in no_run] == ["rdma_qos"]
    assert cli.main([*argv, "nosuchrole"]) == 2
    assert "--tags nosuchrole: not a tag of provision.yml" in capsys.readouterr().err
