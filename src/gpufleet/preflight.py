"""What every command checks on the controller before the first play, so that a configuration
error is exit 2 with nothing drained or changed: the report directory can be written (and no
report file in it is a directory), the inventory parses and has hosts in the groups the command
runs on, every vaulted variable can be decrypted with the secret given, and --tags names tags the
playbook has.

The inventory is read by the ansible-inventory of gpufleet's own installation, as the run will
read it. A vaulted value in ansible-core's AES256 format (1.1) is tried as ansible-core tries it
before decrypting: the key derived from the secret and the value's salt (PBKDF2-SHA256) must give
the value's HMAC. That needs hashlib and hmac only; importing ansible-core's vault library (and with
it Ansible's configuration and templating) cost every run ~0.3 CPU-s (bench/README.md, issue 40),
so it is imported only for a value in another format (a labelled 1.2 one), which it decides. A value
that opened with the same secret in an earlier run is not tried again (vault_checked: one key derivation
per run instead of one per value).
"""

from __future__ import annotations

import binascii
import configparser
import contextlib
import hashlib
import hmac
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet import catalog, inventory_cache, report_files, runner, vault_checked

# The group of the GPU nodes every playbook runs on (the leaf switches are runner.SWITCH_GROUP).
NODE_GROUP = "gpu_nodes"
# How long a vault password script may take to print the password (it gets no terminal).
VAULT_SCRIPT_TIMEOUT_S = 30.0


class ConfigError(Exception):
    """A configuration error found before anything ran (the CLI's exit 2)."""


@dataclass(frozen=True)
class Vaulted:
    host: str
    variable: str
    ciphertext: str


def report_dir(
    path: Path,
    option: str = "--report-dir",
    create: bool = True,
    files: Iterable[str] = tuple(report_files.FILES.values()),
) -> None:
    """The report directory (or ``option``'s) exists (made here unless ``create`` is False), a file
    can be written in it, and none of the ``files`` the run will write there is a directory (a
    report that cannot be written is found before the run, not after it)."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path} is a file, not a directory: name a directory")
    if not create and not path.is_dir():
        raise ConfigError(f"{option} {path} does not exist: name the directory node_exporter reads")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".gpufleet-probe-"):
            pass
    except OSError as exc:
        raise ConfigError(f"{option} {path} cannot be written: {exc.strerror or exc}") from None
    for name in files:
        # written as NAME.tmp, then renamed over NAME: neither may be a directory
        for target in (path / name, path / f"{name}.tmp"):
            if target.is_dir() and not target.is_symlink():
                raise ConfigError(
                    f"{option} {path}: {target.name} in it is a directory, where the run writes a "
                    "file: remove it or name another directory"
                )


def vault_file(given: Path | None) -> Path | None:
    """--vault-password-file, else ANSIBLE_VAULT_PASSWORD_FILE as ansible-playbook honours it."""
    if given is not None:
        return given
    from_env = os.environ.get("ANSIBLE_VAULT_PASSWORD_FILE")
    return Path(from_env).expanduser() if from_env else None


def inventory_file(given: Path | None) -> Path:
    """--inventory, else ANSIBLE_INVENTORY, else the `inventory` of the ansible.cfg gpufleet's runs use
    (relative to that file), as ansible-playbook would find it; refused when none names a file."""
    from_env = os.environ.get("ANSIBLE_INVENTORY")
    cfg = runner.ANSIBLE_CFG
    if given is not None:
        found, source = given, "--inventory"
    elif from_env:
        if "," in from_env:
            raise ConfigError(f"ANSIBLE_INVENTORY={from_env} names several inventories: give one with -i")
        found, source = Path(from_env).expanduser(), "ANSIBLE_INVENTORY"
    else:
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(cfg, encoding="utf-8")
        setting = parser.get("defaults", "inventory", fallback="")
        if not setting:
            raise ConfigError(
                f"no inventory: give -i INVENTORY, set ANSIBLE_INVENTORY, or set inventory in {cfg}"
            )
        found, source = cfg.parent / Path(setting).expanduser(), f"inventory in {cfg}"
    if not found.exists():
        raise ConfigError(f"inventory {found} does not exist (from {source})")
    return found


def read_inventory(inventory: Path, limit: str | None = None) -> dict[str, Any]:
    """`ansible-inventory --list` of the inventory (within --limit); an inventory that does not parse,
    or a limit that leaves no host, is refused."""
    env = runner.tool_environment(
        ANSIBLE_INVENTORY_UNPARSED_FAILED="True", ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="True"
    )
    env.pop("ANSIBLE_VAULT_PASSWORD_FILE", None)  # listing needs no secret; decrypting is checked below
    # a static inventory's listing is kept from the run before while none of its inputs changed
    inputs = inventory_cache.key(inventory, limit, env)
    listed = inventory_cache.get(inputs) if inputs is not None else None
    if listed is None:
        listed = _list(inventory, limit, env)
        if inputs is not None and inventory_cache.key(inventory, limit, env) == inputs:
            inventory_cache.put(inputs, listed)
    if not hosts(listed):
        where = f"--limit {limit} matches no host of" if limit else "no host in"
        raise ConfigError(f"{where} inventory {inventory}")
    return listed


def _list(inventory: Path, limit: str | None, env: dict[str, str]) -> dict[str, Any]:
    argv = ["ansible-inventory", "-i", str(inventory), "--list", *(["--limit", limit] if limit else [])]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    if done.returncode != 0:
        raise ConfigError(f"inventory {inventory} could not be read: {_reason(done.stderr)}")
    try:
        listed: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"inventory {inventory}: ansible-inventory printed no JSON ({exc})") from None
    return listed


def hosts(listed: dict[str, Any]) -> dict[str, str]:
    """The hosts of an ansible-inventory listing: {address (ansible_host, a switch's API address,
    else the name): name}."""
    hostvars = (listed.get("_meta") or {}).get("hostvars", {})
    names: set[str] = set(hostvars)
    for name, group in listed.items():
        if name != "_meta" and isinstance(group, dict):
            names.update(group.get("hosts") or [])

    def address(name: str) -> str:
        own = hostvars.get(name) or {}
        return str(own.get("ansible_host") or own.get("gpufleet_switch_address") or name)

    return {address(n): n for n in sorted(names)}


def group_members(listed: dict[str, Any], group: str) -> set[str]:
    """The hosts in ``group`` of an ansible-inventory listing, and in its child groups."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = [group]
    while todo:
        name = todo.pop()
        if name in seen or not isinstance(listed.get(name), dict):
            continue
        seen.add(name)
        found.update(str(h) for h in listed[name].get("hosts") or [])
        todo.extend(str(c) for c in listed[name].get("children") or [])
    return found


def run_on(listed: dict[str, Any], playbook: str, inventory: Path, limit: str | None) -> None:
    """The hosts within --limit (``listed``) include one of the groups the playbook's plays run on:
    else the run would do nothing and report an empty fleet as all good."""
    book = catalog.PLAYBOOKS[playbook]
    groups = [runner.SWITCH_GROUP] if book.runs_on_leaves else [NODE_GROUP]
    if book.reads_leaves:
        groups.append(runner.SWITCH_GROUP)
    if any(group_members(listed, group) for group in groups):
        return
    names = sorted(hosts(listed).values())
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    within = f" within --limit {limit}" if limit else ""
    raise ConfigError(
        f"inventory {inventory} has no host in group {' or '.join(groups)}{within} (its hosts: {shown}): "
        f"gpufleet runs on the GPU nodes of group {NODE_GROUP} and the leaf switches of group "
        f"{runner.SWITCH_GROUP}; is this the fleet's inventory?"
    )


def cabling_leaves(listed: dict[str, Any]) -> None:
    """Every leaf a node's fabric_cabling names is a leaf of the inventory (a plan naming another
    is a configuration error, found before any node is changed, not a swapped cable after it).
    An inventory with no leaf_switches at all manages no leaf: nothing to hold the plan against.
    Values a template computes, or of another form, are left to the fabric role's own check."""
    leaves = group_members(listed, runner.SWITCH_GROUP)
    if not leaves:
        # no leaf managed here (a network team's leaves): the plan's neighbours are judged by LLDP alone
        return
    problems = []
    for host, variables in sorted((listed.get("_meta") or {}).get("hostvars", {}).items()):
        plan = variables.get("fabric_cabling") if isinstance(variables, dict) else None
        if not isinstance(plan, dict):
            continue
        for ibdev, value in sorted(plan.items(), key=lambda item: str(item[0])):
            if not isinstance(value, str) or "{" in value or value.count(":") != 1:
                continue
            leaf = value.split(":", 1)[0]
            if leaf and leaf not in leaves:
                problems.append(
                    f"{host}: fabric_cabling[{ibdev}] is {value}, and {leaf} is not in {runner.SWITCH_GROUP}"
                )
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ConfigError(
            f"{shown} (its leaves: {', '.join(sorted(leaves)) or 'none'}): correct the cabling plan or add "
            "the leaf to the inventory"
        )


def _reason(stderr: str) -> str:
    """The lines of ansible-inventory's error that say why (not its banners)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    wanted = [line for line in lines if not line.startswith(("<<<", "Origin:", "^"))]
    return " ".join(wanted[:4]) or "no error text"


def vaulted(listed: dict[str, Any]) -> Iterator[Vaulted]:
    """Every vaulted value in the hosts' variables (ansible-inventory lists it as __ansible_vault)."""
    for host, variables in sorted((listed.get("_meta") or {}).get("hostvars", {}).items()):
        for name, value in sorted(variables.items()):
            if isinstance(value, dict) and isinstance(value.get("__ansible_vault"), str):
                yield Vaulted(host, name, value["__ansible_vault"])


def vault_file_usable(path: Path) -> None:
    """--vault-password-file names a file (a directory, or nothing, is said as such)."""
    if path.is_dir():
        raise ConfigError(
            f"--vault-password-file {path} is a directory: name the file that holds the vault password "
            "(or an executable script that prints it)"
        )
    if not path.exists():
        raise ConfigError(f"--vault-password-file {path} does not exist")
    if not path.is_file():
        raise ConfigError(f"--vault-password-file {path} is not a regular file")


def _secret(path: Path) -> bytes:
    """The vault password in a file, or printed by it when it is executable (as Ansible does)."""
    vault_file_usable(path)
    if os.access(path, os.X_OK):
        return _script_output(path)
    try:
        return path.read_bytes().strip()
    except OSError as exc:
        raise ConfigError(f"--vault-password-file {path} cannot be read: {exc.strerror or exc}") from None


def _script_output(path: Path) -> bytes:
    """What a vault password script prints, within VAULT_SCRIPT_TIMEOUT_S. It runs in a process
    group of its own, without a terminal or stdin, so that one that hangs is stopped with everything
    it started (no orphan left running)."""
    try:
        script = subprocess.Popen(
            [str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        raise ConfigError(f"vault password script {path} could not be run: {exc.strerror or exc}") from None
    try:
        out, _ = script.communicate(timeout=VAULT_SCRIPT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _stop_group(script)
        raise ConfigError(
            f"vault password script {path} did not finish within {VAULT_SCRIPT_TIMEOUT_S:g} s (stopped, "
            "with what it started): it must print the password without waiting for input"
        ) from None
    except BaseException:
        _stop_group(script)
        raise
    # what it left running in its group (a helper it forked) goes too
    _stop_group(script)
    if script.returncode != 0:
        raise ConfigError(f"vault password script {path} failed (rc={script.returncode})")
    return out.strip()


def _stop_group(script: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the script's process group (its pid: start_new_session), then its exit collected."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(script.pid, signal.SIGKILL)
    script.kill()
    script.wait()


def vault_secrets(listed: dict[str, Any], secret_file: Path | None) -> None:
    """Every vaulted variable decrypts with the secret given; a vaulted inventory without one is refused."""
    found = list(vaulted(listed))
    if not found:
        return
    names = sorted({v.variable for v in found})
    hosts = sorted({v.host for v in found})
    where = f"{', '.join(names)} ({len(hosts)} host{'s' if len(hosts) != 1 else ''}, e.g. {hosts[0]})"
    if secret_file is None:
        raise ConfigError(
            f"the inventory has vaulted variables, {where}, and no vault secret was given: "
            "pass --vault-password-file FILE (or set ANSIBLE_VAULT_PASSWORD_FILE)"
        )
    secret = _secret(secret_file)
    # the values that opened with this secret in an earlier run are not tried again (vault_checked)
    opened = vault_checked.Opened(secret, VAULT_ROUNDS)
    for value in found:
        if value.ciphertext in opened:
            continue
        if not _opens(secret, value.ciphertext):
            raise ConfigError(
                f"{value.host}: {value.variable} does not decrypt with --vault-password-file {secret_file}: "
                "is it the vault password of this inventory?"
            )
        opened.add(value.ciphertext)
    opened.save()


# ansible-core's vault format 1.1 (ansible/parsing/vault: VaultAES256): the header, then the hex of
# "hex(salt)\nhex(hmac)\nhex(ciphertext)"; PBKDF2-HMAC-SHA256 of the secret, 10,000 rounds, gives
# 80 bytes: the AES key, the HMAC key, the counter's start.
VAULT_HEADER = ["$ANSIBLE_VAULT", "1.1", "AES256"]
VAULT_ROUNDS = 10000
VAULT_KEY_BYTES = 32


def _opens(secret: bytes, vaulttext: str) -> bool:
    """The secret opens this vaulted value: its HMAC checks, as ansible-core checks it before it
    decrypts. A value in another format (or an empty secret) is left to ansible-core's vault."""
    lines = vaulttext.splitlines()
    if secret and vaulttext.startswith(VAULT_HEADER[0]) and lines[0].strip().split(";") == VAULT_HEADER:
        try:
            salt, mac, ciphertext = binascii.unhexlify("".join(lines[1:])).split(b"\n", 2)
            salt, mac, ciphertext = (binascii.unhexlify(part) for part in (salt, mac, ciphertext))
        except ValueError:  # binascii.Error is one; a value cut short splits in fewer than three
            return _opened_by_ansible(secret, vaulttext)
        keys = hashlib.pbkdf2_hmac("sha256", secret, salt, VAULT_ROUNDS, dklen=2 * VAULT_KEY_BYTES + 16)
        given = hmac.new(keys[VAULT_KEY_BYTES : 2 * VAULT_KEY_BYTES], ciphertext, hashlib.sha256).digest()
        return hmac.compare_digest(given, mac)
    return _opened_by_ansible(secret, vaulttext)


def _opened_by_ansible(secret: bytes, vaulttext: str) -> bool:
    # imported here, for a value in another format only (the module docstring says why)
    from ansible.errors import AnsibleError
    from ansible.parsing.vault import VaultLib, VaultSecret

    try:
        VaultLib([("default", VaultSecret(secret))]).decrypt(vaulttext)
    except AnsibleError:
        return False
    return True


def tags(playbook: str, wanted: str | None) -> None:
    """Every tag in --tags is one the playbook has (a misspelt role would otherwise run nothing)."""
    if not wanted:
        return
    env = runner.tool_environment()
    runner.ensure_collection_link()
    argv = ["ansible-playbook", "--list-tags", "-i", "localhost,", str(runner.PLAYBOOK_DIR / playbook)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    if done.returncode != 0:
        raise ConfigError(f"could not list the tags of {playbook}: {_reason(done.stderr)}")
    known: set[str] = set()
    for line in done.stdout.splitlines():
        if "TAGS: [" in line:
            inside = line.split("TAGS: [", 1)[1].rsplit("]", 1)[0]
            known.update(t.strip() for t in inside.split(",") if t.strip())
    unknown = [t.strip() for t in wanted.split(",") if t.strip() and t.strip() not in known]
    if unknown:
        raise ConfigError(
            f"--tags {', '.join(unknown)}: not a tag of {playbook}; it has: {', '.join(sorted(known))}"
        )
