"""What DSP0266 asks of a Redfish service besides its resources: the OData service document
(/redfish/v1/odata), the CSDL metadata document (/redfish/v1/$metadata), the OData-Version it
speaks, the `Link: rel=describedby` header naming each resource's JSON schema and each resource's
`ETag`.

Not modelled: the service's own CSDL (no OEM schemas, so $metadata only references DMTF's), and
`OData-MaxVersion` negotiation (only 4.0 is spoken; a 4.0-only service answers it with 4.0 anyway).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gpufleet_sim.bmc.payloads import Resource

ROOT = "/redfish/v1"
SERVICE_DOCUMENT = f"{ROOT}/odata"
METADATA = f"{ROOT}/$metadata"
ODATA_VERSION = "4.0"
SCHEMAS = "http://redfish.dmtf.org/schemas/v1"
# The service root's version: its ServiceContainer is the EntityContainer $metadata extends.
SERVICE_ROOT_TYPE = "ServiceRoot.v1_20_0"
# Every resource type the BMC serves ("Namespace.vX_Y_Z", or "Namespace" for a collection), and
# Message, which its error bodies carry. test_bmc checks every served @odata.type is listed here.
TYPES = (
    SERVICE_ROOT_TYPE,
    "AccountService.v1_18_1",
    "Chassis.v1_28_0",
    "ChassisCollection",
    "ComputerSystem.v1_22_0",
    "ComputerSystemCollection",
    "CoolantConnector.v1_3_0",
    "CoolantConnectorCollection",
    "CoolingUnit.v1_5_0",
    "CoolingUnitCollection",
    "LeakDetection.v1_2_0",
    "LeakDetector.v1_6_0",
    "LeakDetectorCollection",
    "Manager.v1_19_0",
    "ManagerAccount.v1_14_1",
    "ManagerAccountCollection",
    "ManagerCollection",
    "Message.v1_2_0",
    "Role.v1_3_3",
    "RoleCollection",
    "Session.v1_8_0",
    "SessionCollection",
    "SessionService.v1_2_0",
    "ThermalEquipment.v1_2_0",
    "ThermalMetrics.v1_3_2",
    "ThermalSubsystem.v1_5_0",
)


def unsupported_version(requested: str | None) -> bool:
    """True for an OData-Version header naming a version other than 4.0 (DSP0266: answer 412)."""
    return requested is not None and requested.strip() != ODATA_VERSION


def service_document(root: Resource) -> Resource:
    """The OData service document: the service root and each top-level resource it links to."""
    value: list[dict[str, Any]] = [{"name": "Service", "kind": "Singleton", "url": f"{ROOT}/"}]
    for name, target in root.items():
        if isinstance(target, dict) and set(target) == {"@odata.id"}:
            value.append({"name": name, "kind": "Singleton", "url": target["@odata.id"]})
    return {"@odata.context": METADATA, "value": value}


def _reference(odata_type: str) -> str:
    namespace = odata_type.split(".", 1)[0]
    includes = [namespace] if namespace == odata_type else [namespace, odata_type]
    lines = [f'  <edmx:Reference Uri="{SCHEMAS}/{namespace}_v1.xml">']
    lines += [f'    <edmx:Include Namespace="{n}"/>' for n in includes]
    lines.append("  </edmx:Reference>")
    return "\n".join(lines)


def metadata() -> bytes:
    """The CSDL metadata document: Edmx references to the DMTF schemas of TYPES, and the service's
    EntityContainer, as DMTF's mockups' $metadata has them."""
    references = "\n".join(_reference(t) for t in sorted(TYPES))
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">
{references}
  <edmx:Reference Uri="{SCHEMAS}/RedfishExtensions_v1.xml">
    <edmx:Include Namespace="RedfishExtensions.v1_0_0" Alias="Redfish"/>
  </edmx:Reference>
  <edmx:DataServices>
    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">
      <EntityContainer Name="Service" Extends="{SERVICE_ROOT_TYPE}.ServiceContainer"/>
    </Schema>
  </edmx:DataServices>
</edmx:Edmx>
""".encode()


def described_by(resource: Resource) -> str | None:
    """The `Link` header value naming the JSON schema of a resource's @odata.type, e.g.
    `<http://redfish.dmtf.org/schemas/v1/Chassis.v1_28_0.json>; rel=describedby`; a collection's
    schema is unversioned (ChassisCollection.json). None for a document without @odata.type."""
    odata_type = resource.get("@odata.type")
    if not isinstance(odata_type, str):
        return None
    namespace, _, rest = odata_type.lstrip("#").partition(".")
    version = rest.split(".", 1)[0] if rest.startswith("v") else ""
    schema = f"{namespace}.{version}" if version else namespace
    return f"<{SCHEMAS}/{schema}.json>; rel=describedby"


def etag(resource: Resource) -> str:
    """A strong ETag of the resource as served: DSP0266 requires one on every GET of a ManagerAccount
    (and recommends it on every resource); a hash of the content changes when a reading does."""
    digest = hashlib.sha256(json.dumps(resource, sort_keys=True).encode()).hexdigest()
    return f'"{digest[:16]}"'
