"""The vaulted values the preflight found to open with a vault secret, kept from one run to the next.

The preflight tries every vaulted value of the inventory with the secret given (preflight.vault_secrets):
one PBKDF2-SHA256 of 10,000 rounds per value, as each value has its own salt, ~14 ms of CPU each: a
32-node fleet's BMC and leaf passwords cost every command ~0.55 CPU-s, a 1,000-node one ~14 s, for the
same answer run after run (bench/README.md, issue 40).

What is kept, in gpufleet's state directory (a directory only its owner reads), per secret: a random salt,
the secret's PBKDF2-SHA256 with that salt and the vault's own rounds (no weaker than the vaulted values
themselves, which hold a salt and an HMAC keyed by the same derivation), and the SHA-256 of each vaulted
value (its whole text) that opened with it. A run derives the secret's fingerprint once; where it is a
kept one, a value whose digest is kept opened with this very secret before, and only the others are tried.
A value that changed is a new digest, tried again; a secret that is not a kept one tries every value.
Nothing here ever says a value opens that was not tried with this secret. A file that cannot be read or
written is no failure: every value is tried, as without it. GPUFLEET_INVENTORY_CACHE=0 (the preflight's
kept listing's switch) turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from gpufleet import atomic_file, inventory_cache, runlock

VERSION = 1
SALT_BYTES = 16
# The secrets kept (the newest first), and the digests kept per secret (a fleet's values, several times).
MAX_SECRETS = 4
MAX_DIGESTS = 20000


def path() -> Path:
    return runlock.state_dir() / "vault-checked" / "opened.json"


def digest(vaulttext: str) -> str:
    return hashlib.sha256(vaulttext.encode("utf-8")).hexdigest()


def _fingerprint(secret: bytes, salt: bytes, rounds: int) -> str:
    return hashlib.pbkdf2_hmac("sha256", secret, salt, rounds).hex()


def _entries() -> list[dict[str, Any]]:
    try:
        kept = json.loads(path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(kept, dict) or kept.get("version") != VERSION:
        return []
    if not isinstance(kept.get("secrets"), list):
        return []
    return [
        e
        for e in kept["secrets"]
        if isinstance(e, dict)
        and isinstance(e.get("salt"), str)
        and isinstance(e.get("fingerprint"), str)
        and isinstance(e.get("opened"), list)
    ]


class Opened:
    """The values known to open with one secret (``text in opened``), read once per run, and those this
    run found to open (``add``), kept by ``save``. ``rounds``: the vault format's own key derivation
    rounds (preflight.VAULT_ROUNDS), so that the fingerprint is no weaker than a vaulted value."""

    def __init__(self, secret: bytes, rounds: int) -> None:
        self.enabled = inventory_cache.enabled() and bool(secret)
        self._secret = secret
        self._rounds = rounds
        self._entries = _entries() if self.enabled else []
        self._mine: dict[str, Any] | None = None
        for entry in self._entries:
            with contextlib.suppress(ValueError):
                salt = bytes.fromhex(entry["salt"])
                if hmac.compare_digest(_fingerprint(secret, salt, rounds), entry["fingerprint"]):
                    self._mine = entry
                    break
        self.known = {d for d in (self._mine or {}).get("opened", []) if isinstance(d, str)}
        self._added: set[str] = set()

    def __contains__(self, vaulttext: str) -> bool:
        return digest(vaulttext) in self.known

    def add(self, vaulttext: str) -> None:
        self._added.add(digest(vaulttext))

    def save(self) -> None:
        if not self.enabled or not self._added - self.known:
            return
        mine = self._mine
        if mine is None:
            salt = os.urandom(SALT_BYTES)
            mine = {
                "salt": salt.hex(),
                "fingerprint": _fingerprint(self._secret, salt, self._rounds),
                "opened": [],
            }
        opened = sorted(self.known | self._added)[-MAX_DIGESTS:]
        others = [e for e in self._entries if e is not self._mine]
        secrets = [{**mine, "opened": opened}, *others][:MAX_SECRETS]
        where = path().parent
        try:
            where.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(where, 0o700)
            atomic_file.replace(path(), json.dumps({"version": VERSION, "secrets": secrets}))
        except OSError:
            return
