"""Redfish error responses: DMTF Base message registry entries in the DSP0266 error shape."""

from __future__ import annotations

from typing import Any

# The Base registry version the messages are drawn from (Base.1.18.x, DSP8011 2024.x).
REGISTRY = "Base.1.18"

# MessageId -> (message with %1.. placeholders, severity, resolution), from the Base registry.
_MESSAGES: dict[str, tuple[str, str, str]] = {
    "NoValidSession": (
        "There is no valid session established with the implementation.",
        "Critical",
        "Establish a session before attempting any operations.",
    ),
    "ResourceAtUriUnauthorized": (
        "While accessing the resource at '%1', the service received an authorization error '%2'.",
        "Critical",
        "Ensure that the appropriate access is provided for the service in order for it to access the URI.",
    ),
    "ResourceMissingAtURI": (
        "The resource at the URI '%1' was not found.",
        "Critical",
        "Place a valid resource at the URI or correct the URI and resubmit the request.",
    ),
    "OperationNotAllowed": (
        "The HTTP method is not allowed on this resource.",
        "Critical",
        "None.",
    ),
    "SessionLimitExceeded": (
        "The session establishment failed due to the number of simultaneous sessions exceeding the "
        "limit of the implementation.",
        "Critical",
        "Reduce the number of other sessions before trying to establish the session or increase the "
        "limit of simultaneous sessions, if supported.",
    ),
    "HeaderInvalid": (
        "Header '%1' is invalid.",
        "Critical",
        "Resubmit the request with a valid request header.",
    ),
    "QueryParameterUnsupported": (
        "Query parameter '%1' is not supported.",
        "Warning",
        "Correct or remove the query parameter and resubmit the request.",
    ),
    "MalformedJSON": (
        "The request body submitted was malformed JSON and could not be parsed by the receiving service.",
        "Critical",
        "Ensure that the request body is valid JSON and resubmit the request.",
    ),
    "ActionParameterMissing": (
        "The action %1 requires the parameter %2 to be present in the request body.",
        "Critical",
        "Supply the action with the required parameter in the request body when the request is resubmitted.",
    ),
    "ActionParameterNotSupported": (
        "The parameter %1 for the action %2 is not supported on the target resource.",
        "Warning",
        "Remove the parameter supplied and resubmit the request if the operation failed.",
    ),
    "ActionParameterValueNotInList": (
        "The value '%1' for the parameter %2 in the action %3 is not in the list of acceptable values.",
        "Warning",
        "Choose a value from the enumeration list that the implementation can support and resubmit the "
        "request if the operation failed.",
    ),
    "ActionParameterValueTypeError": (
        "The value '%1' for the parameter %2 in the action %3 is not a type that the parameter can accept.",
        "Warning",
        "Correct the value for the parameter in the request body and resubmit the request if the operation "
        "failed.",
    ),
    "PropertyMissing": (
        "The property '%1' is a required property and must be included in the request.",
        "Warning",
        "Ensure that the property is in the request body and has a valid value and resubmit the request "
        "if the operation failed.",
    ),
}


def body(message_id: str, *args: str, note: str = "") -> dict[str, Any]:
    """{"error": {"code", "message", "@Message.ExtendedInfo": [Message]}} for one registry message;
    ``note`` is added to the top-level message only (the Message stays the registry's)."""
    text, severity, resolution = _MESSAGES[message_id]
    for i, arg in enumerate(args, start=1):
        text = text.replace(f"%{i}", arg)
    full_id = f"{REGISTRY}.{message_id}"
    return {
        "error": {
            "code": full_id,
            "message": f"{text} {note}" if note else text,
            "@Message.ExtendedInfo": [
                {
                    "@odata.type": "#Message.v1_2_0.Message",
                    "MessageId": full_id,
                    "Message": text,
                    "MessageArgs": list(args),
                    "MessageSeverity": severity,
                    "Resolution": resolution,
                }
            ],
        }
    }
