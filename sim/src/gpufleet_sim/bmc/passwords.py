"""BMC account passwords: generated at `sim up`, kept in the node state only as a salted hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

# PBKDF2 rounds: cheap enough for basic auth on every request, as BMCs do it.
_ROUNDS = 10_000


def new_password() -> str:
    return secrets.token_urlsafe(18)


def hashed(password: str) -> dict[str, str]:
    """The node state's record of a password: {"salt", "password_hash"}."""
    salt = secrets.token_hex(16)
    return {"salt": salt, "password_hash": _digest(password, salt)}


def _digest(password: str, salt: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), _ROUNDS).hex()


def verify(bmc: dict[str, Any], username: str, password: str) -> bool:
    if "password_hash" not in bmc or not hmac.compare_digest(username, str(bmc.get("username", ""))):
        return False
    return hmac.compare_digest(_digest(password, str(bmc["salt"])), str(bmc["password_hash"]))
