"""The BMC's query parameters: it supports none, and says so.

The service root's ProtocolFeaturesSupported lists every query feature of ServiceRoot v1_20_0 as
unsupported. DSP0266: a service answers 501 Not Implemented to a query parameter that starts with
`$` it does not support, and ignores unknown ones that do not (DMTF's Protocol Validator sends
`?rpvunknown`). Redfish's own `only`, `excerpt` and `includeoriginofcondition` are refused like the
`$` ones: a client that asked for one member, or an excerpt, and got the whole resource would read
it wrong.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

# Query parameters DSP0266 defines without a `$`.
REDFISH_PARAMETERS = ("only", "excerpt", "includeoriginofcondition")

PROTOCOL_FEATURES_SUPPORTED: dict[str, Any] = {
    "ExpandQuery": {"ExpandAll": False, "Levels": False, "Links": False, "NoLinks": False},
    "SelectQuery": False,
    "FilterQuery": False,
    "FilterQueryComparisonOperations": False,
    "FilterQueryCompoundOperations": False,
    "OnlyMemberQuery": False,
    "ExcerptQuery": False,
    "TopSkipQuery": False,
    "IncludeOriginOfConditionQuery": False,
    "DeepOperations": {"DeepPATCH": False, "DeepPOST": False},
    "MultipleHTTPRequests": True,
}


def unsupported(target: str) -> str | None:
    """The first query parameter of a request target the service refuses (501), or None."""
    _, _, query = target.partition("?")
    for name, _ in parse_qsl(query.partition("#")[0], keep_blank_values=True):
        # names are case-sensitive, as OData's are
        if name.startswith("$") or name in REDFISH_PARAMETERS:
            return name
    return None
