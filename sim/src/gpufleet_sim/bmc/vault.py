"""Ansible Vault for the sim inventory's BMC passwords, with a per-fleet vault password file."""

from __future__ import annotations

import secrets
from pathlib import Path

import yaml


def ensure_password_file(path: Path) -> Path:
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(32) + "\n", encoding="utf-8")
    return path


def _vault(password_file: Path) -> object:
    # Imported here: ansible is heavy, and only `sim up` and tests need it.
    from ansible.parsing.vault import VaultLib, VaultSecret

    secret = VaultSecret(password_file.read_text(encoding="utf-8").strip().encode())
    return VaultLib([("default", secret)])


def encrypt(plaintext: str, password_file: Path) -> str:
    """The `$ANSIBLE_VAULT;1.1;AES256` text of plaintext, as `ansible-vault encrypt_string` makes it."""
    vault = _vault(password_file)
    return bytes(vault.encrypt(plaintext)).decode()  # type: ignore[attr-defined]


def decrypt(vaulttext: str, password_file: Path) -> str:
    vault = _vault(password_file)
    return bytes(vault.decrypt(vaulttext)).decode()  # type: ignore[attr-defined]


class Vaulted(str):
    """A vault-encrypted inventory value: written as `!vault |` by InventoryDumper."""


class InventoryDumper(yaml.SafeDumper):
    pass


def _represent(dumper: yaml.SafeDumper, data: Vaulted) -> yaml.Node:
    return dumper.represent_scalar("!vault", str(data), style="|")


InventoryDumper.add_representer(Vaulted, _represent)


class InventoryLoader(yaml.SafeLoader):
    """Reads the sim inventory back, `!vault` values as Vaulted (still encrypted)."""


def _construct(loader: yaml.SafeLoader, node: yaml.Node) -> Vaulted:
    assert isinstance(node, yaml.ScalarNode)
    return Vaulted(loader.construct_scalar(node))


InventoryLoader.add_constructor("!vault", _construct)
