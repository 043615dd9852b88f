"""The small JSON shapes every simulated Redfish resource is built from: links, collections, Status."""

from __future__ import annotations

from typing import Any

Resource = dict[str, Any]


def link(path: str) -> dict[str, str]:
    return {"@odata.id": path}


def status(health: str = "OK", rollup: str | None = None) -> dict[str, str]:
    current = {"State": "Enabled", "Health": health}
    if rollup is not None:
        current["HealthRollup"] = rollup
    return current


def collection(odata_type: str, name: str, path: str, members: list[str]) -> Resource:
    return {
        "@odata.type": f"#{odata_type}.{odata_type}",
        "Name": name,
        "Members@odata.count": len(members),
        "Members": [link(m) for m in members],
        "@odata.id": path,
    }


def resource(odata_type: str, ident: str, name: str, path: str, **body: Any) -> Resource:
    """A resource as DMTF's mockups order it: its type, Id and Name, then ``body`` in the order given,
    then its @odata.id (``path``)."""
    return {"@odata.type": odata_type, "Id": ident, "Name": name, **body, "@odata.id": path}
