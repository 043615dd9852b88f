"""The preflight tries a vaulted value with a secret once: a later run with the same secret derives one
key, not one per value; a new value, another secret or a lost file tries them again; a value that does
not open is refused whatever was kept."""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible.parsing.vault import VaultLib, VaultSecret

from gpufleet import preflight, vault_checked

SECRET = b"right"


def _listed(values: dict[str, str]) -> dict[str, Any]:
    """An ansible-inventory listing with one vaulted BMC password per host."""
    return {
        "_meta": {
            "hostvars": {
                host: {"gpufleet_bmc_password": {"__ansible_vault": text}} for host, text in values.items()
            }
        }
    }


def _encrypt(plain: str, secret: bytes = SECRET) -> str:
    return VaultLib([("default", VaultSecret(secret))]).encrypt(plain).decode()


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[], int]:
    """A state directory of the test's own; counts the PBKDF2 key derivations since the last call."""
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("GPUFLEET_INVENTORY_CACHE", raising=False)
    real = hashlib.pbkdf2_hmac
    count = [0]

    def counted(*args: Any, **kwargs: Any) -> bytes:
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counted)

    def taken() -> int:
        seen, count[0] = count[0], 0
        return seen

    return taken


def _secret_file(tmp_path: Path, secret: bytes) -> Path:
    path = tmp_path / f"secret-{secret.decode()}"
    path.write_bytes(secret + b"\n")
    return path


def test_a_second_run_with_the_same_secret_derives_one_key(
    tmp_path: Path, derivations: Callable[[], int]
) -> None:
    listed = _listed({f"node{i:02d}": _encrypt(f"pw{i}") for i in range(1, 9)})
    right = _secret_file(tmp_path, SECRET)
    preflight.vault_secrets(listed, right)
    # eight values tried, and the secret's fingerprint for the file
    assert derivations() == 9
    preflight.vault_secrets(listed, right)
    assert derivations() == 1
    kept = json.loads(vault_checked.path().read_text())
    assert len(kept["secrets"]) == 1 and len(kept["secrets"][0]["opened"]) == 8
    assert SECRET.decode() not in vault_checked.path().read_text()
    assert stat.S_IMODE(vault_checked.path().parent.stat().st_mode) == 0o700


def test_a_new_or_changed_value_is_tried_and_one_that_does_not_open_is_refused(
    tmp_path: Path, derivations: Callable[[], int]
) -> None:
    values = {"node01": _encrypt("a"), "node02": _encrypt("b")}
    right = _secret_file(tmp_path, SECRET)
    preflight.vault_secrets(_listed(values), right)
    derivations()
    # node02's value re-encrypted with the same secret: a new text, tried (one derivation for it)
    preflight.vault_secrets(_listed({**values, "node02": _encrypt("b")}), right)
    assert derivations() == 2
    # node03's value is another secret's: refused, though the others were kept
    with pytest.raises(preflight.ConfigError, match="node03: gpufleet_bmc_password does not decrypt"):
        preflight.vault_secrets(_listed({**values, "node03": _encrypt("c", b"other")}), right)


def test_another_secret_tries_every_value_and_a_wrong_one_is_refused(
    tmp_path: Path, derivations: Callable[[], int]
) -> None:
    values = {"node01": _encrypt("a"), "node02": _encrypt("b")}
    preflight.vault_secrets(_listed(values), _secret_file(tmp_path, SECRET))
    derivations()
    with pytest.raises(preflight.ConfigError, match="node01: gpufleet_bmc_password does not decrypt"):
        preflight.vault_secrets(_listed(values), _secret_file(tmp_path, b"wrong"))
    # the kept secret's fingerprint tried against the wrong one, then node01's value
    assert derivations() == 2
    # a second inventory under its own secret is kept beside the first
    others = {"node09": _encrypt("x", b"second")}
    preflight.vault_secrets(_listed(others), _secret_file(tmp_path, b"second"))
    assert len(json.loads(vault_checked.path().read_text())["secrets"]) == 2
    derivations()
    preflight.vault_secrets(_listed(values), _secret_file(tmp_path, SECRET))
    assert derivations() <= 2  # a fingerprint per kept secret at most, no value tried


@pytest.mark.parametrize("kept", ["not json", '{"version": 1, "secrets": [{"salt": "zz"}]}', "[]"])
def test_a_kept_file_that_does_not_read_tries_every_value(
    tmp_path: Path, derivations: Callable[[], int], kept: str
) -> None:
    values = {"node01": _encrypt("a"), "node02": _encrypt("b")}
    vault_checked.path().parent.mkdir(parents=True)
    vault_checked.path().write_text(kept)
    preflight.vault_secrets(_listed(values), _secret_file(tmp_path, SECRET))
    assert derivations() == 3
    assert len(json.loads(vault_checked.path().read_text())["secrets"][0]["opened"]) == 2


def test_switched_off_with_the_inventory_cache(
    tmp_path: Path, derivations: Callable[[], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLEET_INVENTORY_CACHE", "0")
    values = {"node01": _encrypt("a"), "node02": _encrypt("b")}
    for _ in range(2):
        preflight.vault_secrets(_listed(values), _secret_file(tmp_path, SECRET))
        assert derivations() == 2
    assert not vault_checked.path().exists()
