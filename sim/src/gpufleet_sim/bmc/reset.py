"""The body of a POST to the host's ComputerSystem.Reset, checked as bmcweb checks it.

A body that is not a JSON object is MalformedJSON; a parameter other than ResetType is
ActionParameterNotSupported (annotations, `@...`, are ignored); no ResetType is ActionParameterMissing;
one that is not a string is ActionParameterValueTypeError; one the node does not take (node_power.
RESET_TYPES, which the ComputerSystem lists as ResetType@Redfish.AllowableValues) is
ActionParameterValueNotInList, its message naming the allowed ones. Each is a 400 with that Base
message. A valid one is the node's Fleet's to carry out (node_power.request); the BMC answers 204.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpufleet_sim import node_power
from gpufleet_sim.bmc.resources import RESET_ACTION

PARAMETER = "ResetType"


@dataclass(frozen=True)
class Refusal:
    """A 400: the Base message and its arguments, and a note for the top-level message."""

    message_id: str
    args: tuple[str, ...] = ()
    note: str = ""


def check(raw: bytes) -> str | Refusal:
    """The ResetType asked for, or why the request is refused."""
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError):
        return Refusal("MalformedJSON")
    if not isinstance(body, dict):
        return Refusal("MalformedJSON")
    unknown = sorted(key for key in body if key != PARAMETER and not key.startswith("@"))
    if unknown:
        return Refusal("ActionParameterNotSupported", (unknown[0], RESET_ACTION))
    if PARAMETER not in body:
        return Refusal("ActionParameterMissing", (RESET_ACTION, PARAMETER))
    value = body[PARAMETER]
    if not isinstance(value, str):
        return Refusal("ActionParameterValueTypeError", (json.dumps(value), PARAMETER, RESET_ACTION))
    if value not in node_power.RESET_TYPES:
        allowed = ", ".join(node_power.RESET_TYPES)
        return Refusal(
            "ActionParameterValueNotInList", (value, PARAMETER, RESET_ACTION), f"Allowed values: {allowed}."
        )
    return value
