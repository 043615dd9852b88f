"""The simulated BMC: DMTF-shaped resources from node state, and Redfish auth and errors over TLS."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufleet_sim import faults, state, thermal
from gpufleet_sim.bmc import accounts, errors, launch, odata, query, resources, server, vault

from tests.unit.sim.fake_node import node_state_dir

MOCKUPS = "redfish/dmtf"
SERVER = f"{MOCKUPS}/public-liquid-cooled-server/Chassis/1U"
CDU = f"{MOCKUPS}/public-cooling-unit"


@pytest.fixture
def node_dir(tmp_path: Path) -> Path:
    return node_state_dir(tmp_path, 1)


def view(node_dir: Path) -> resources.View:
    current = state.load(node_dir)
    return resources.View.of(current, float(current["thermal_t"]), {"0A1B": "admin"})


def mockup(fixtures_dir: Path, relpath: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((fixtures_dir / relpath / "index.json").read_text(encoding="utf-8"))
    return data


# -- resource shapes --------------------------------------------------------------------------
def links(resource: Any) -> Iterator[str]:
    if isinstance(resource, dict):
        for key, value in resource.items():
            if key == "@odata.id" and isinstance(value, str):
                yield value
            elif key != "DataSourceUri":
                yield from links(value)
    elif isinstance(resource, list):
        for item in resource:
            yield from links(item)


def crawl(current: resources.View) -> dict[str, dict[str, Any]]:
    """Path -> resource for everything linked from the service root; fails on a dangling link."""
    seen: dict[str, dict[str, Any]] = {}
    pending = [resources.ROOT]
    while pending:
        path = resources.normalise(pending.pop())
        if path in seen:
            continue
        found = resources.get(path, current)
        assert found is not None, f"{path} is linked but not served"
        assert resources.normalise(found["@odata.id"]) == path
        seen[path] = found
        pending.extend(links(found))
    return seen


def test_every_link_from_the_service_root_resolves(node_dir: Path) -> None:
    seen = crawl(view(node_dir))
    assert f"{resources.THERMAL}/CoolantConnectors/Baseboard2" in seen
    assert f"{resources.CHASSIS}/LeakDetectors/Overflow" in seen
    assert f"{accounts.ROLES}/ReadOnly" in seen and f"{accounts.ACCOUNTS}/1" in seen
    assert f"{resources.CDU}/LeakDetection/LeakDetectors/Moisture" in seen
    assert f"{resources.ROOT}/SessionService/Sessions/0A1B" in seen


# (our path, mockup path, keys the schema has that this mockup does not show)
SHAPES = [
    # the cooling unit has no host; a server BMC links its ComputerSystems (bmcweb, public-rackmount1)
    (resources.ROOT, f"{CDU}", {"Systems"}),
    (resources.CHASSIS, SERVER, {"LeakDetectors"}),
    (f"{resources.CHASSIS}/LeakDetectors", f"{CDU}/Chassis/CDU/LeakDetectors", set()),
    (f"{resources.CHASSIS}/LeakDetectors/Overflow", f"{CDU}/Chassis/CDU/LeakDetectors/Overflow", set()),
    (resources.THERMAL, f"{SERVER}/ThermalSubsystem", {"LeakDetection"}),
    (f"{resources.THERMAL}/CoolantConnectors", f"{SERVER}/ThermalSubsystem/CoolantConnectors", set()),
    (f"{resources.THERMAL}/ThermalMetrics", f"{SERVER}/ThermalSubsystem/ThermalMetrics", set()),
    (f"{resources.THERMAL}/LeakDetection", f"{CDU}/ThermalEquipment/CDUs/1/LeakDetection", {"LeakDetectors"}),
    (f"{resources.ROOT}/ThermalEquipment", f"{CDU}/ThermalEquipment", set()),
    (resources.CDU, f"{CDU}/ThermalEquipment/CDUs/1", set()),
    (f"{resources.CDU}/LeakDetection", f"{CDU}/ThermalEquipment/CDUs/1/LeakDetection", {"LeakDetectors"}),
    (
        f"{resources.CDU}/LeakDetection/LeakDetectors/Moisture",
        f"{CDU}/Chassis/CDU/LeakDetectors/Moisture",
        set(),
    ),
    (f"{resources.ROOT}/SessionService", f"{CDU}/SessionService", set()),
    (accounts.ACCOUNT_SERVICE, f"{CDU}/AccountService", {"HTTPBasicAuth"}),
    (accounts.ROLES, f"{CDU}/AccountService/Roles", set()),
    # the mockup's Role lacks the RoleId its own schema requires (DMTF's Service Validator fails it)
    (f"{accounts.ROLES}/Operator", f"{CDU}/AccountService/Roles/Operator", {"RoleId"}),
    (accounts.ACCOUNTS, f"{CDU}/AccountService/Accounts", set()),
    (f"{accounts.ACCOUNTS}/1", f"{CDU}/AccountService/Accounts/1", set()),
    (
        f"{resources.ROOT}/SessionService/Sessions/0A1B",
        f"{CDU}/SessionService/Sessions/1234567890ABCDEF",
        set(),
    ),
]


@pytest.mark.parametrize(("path", "reference", "extra"), SHAPES, ids=[s[0] for s in SHAPES])
def test_resources_are_shaped_like_the_dmtf_mockups(
    node_dir: Path, fixtures_dir: Path, path: str, reference: str, extra: set[str]
) -> None:
    ours, theirs = resources.get(path, view(node_dir)), mockup(fixtures_dir, reference)
    assert ours is not None
    assert ours["@odata.type"] == theirs["@odata.type"]
    assert set(ours) - set(theirs) <= extra
    for key in set(ours) & set(theirs):
        assert type(ours[key]) is type(theirs[key]) or {type(ours[key]), type(theirs[key])} <= {int, float}, (
            key
        )


def test_coolant_connectors_read_like_the_mockups(node_dir: Path, fixtures_dir: Path) -> None:
    references = [
        mockup(fixtures_dir, f"{SERVER}/ThermalSubsystem/CoolantConnectors/CPU1"),
        mockup(fixtures_dir, f"{CDU}/ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1"),
    ]
    known = set().union(*references)
    current = view(node_dir)
    for path in (
        f"{resources.THERMAL}/CoolantConnectors/Baseboard1",
        f"{resources.CDU}/SecondaryCoolantConnectors/1",
    ):
        ours = resources.get(path, current)
        assert ours is not None and set(ours) <= known
        assert ours["@odata.type"] == references[0]["@odata.type"]
        for key in ("FlowLitersPerMinute", "SupplyTemperatureCelsius", "ReturnTemperatureCelsius"):
            assert set(ours[key]) == {"Reading"} and isinstance(ours[key]["Reading"], float)
        delta = ours["DeltaTemperatureCelsius"]["Reading"]
        supply, ret = ours["SupplyTemperatureCelsius"]["Reading"], ours["ReturnTemperatureCelsius"]["Reading"]
        assert delta == pytest.approx(ret - supply, abs=0.11) and ours["Status"]["Health"] == "OK"


def test_readings_follow_the_thermal_model_and_faults(node_dir: Path) -> None:
    path = f"{resources.THERMAL}/CoolantConnectors/Baseboard1"
    healthy = resources.get(path, view(node_dir))
    faults.inject(node_dir, "low-coolant-flow")
    low = resources.get(path, view(node_dir))
    assert healthy is not None and low is not None
    assert low["FlowLitersPerMinute"]["Reading"] == pytest.approx(
        healthy["FlowLitersPerMinute"]["Reading"] / 4, abs=0.1
    )
    assert low["DeltaTemperatureCelsius"]["Reading"] > 3 * healthy["DeltaTemperatureCelsius"]["Reading"]
    assert low["Status"]["Health"] == "Critical"
    subsystem = resources.get(resources.THERMAL, view(node_dir))
    assert subsystem is not None and subsystem["Status"]["Health"] == "Critical"
    faults.inject(node_dir, "hot-gpu")
    metrics = resources.get(f"{resources.THERMAL}/ThermalMetrics", view(node_dir))
    assert metrics is not None
    assert {r["DeviceName"]: r["Reading"] for r in metrics["TemperatureReadingsCelsius"]}["GPU5"] >= 84
    assert metrics["TemperatureSummaryCelsius"]["Internal"]["Reading"] >= 84


def test_load_raises_the_loaded_boards_return_temperature(node_dir: Path) -> None:
    with state.locked(node_dir) as current:
        t0 = float(current["thermal_t"])
        uuids = [g["uuid"] for g in current["gpus"] if g["nvlink_domain"] == 1]
        thermal.change_load(current, uuids, 4, t0)
    current = state.load(node_dir)
    later = resources.View.of(current, t0 + 120, {})
    one, two = (resources.get(f"{resources.THERMAL}/CoolantConnectors/Baseboard{i}", later) for i in (1, 2))
    assert one is not None and two is not None
    assert two["DeltaTemperatureCelsius"]["Reading"] > 2.5 * one["DeltaTemperatureCelsius"]["Reading"]
    assert two["HeatRemovedkW"]["Reading"] > 9


def test_leak_detectors_are_in_the_chassis_collection_and_of_schema_types(node_dir: Path) -> None:
    """Chassis.LeakDetectors (Chassis v1_26+) lists the detectors the deprecated
    ThermalSubsystem/LeakDetection reports, in the same state; every LeakDetectorType is one the
    LeakDetector schema allows (Overflow was not)."""
    for leaking in (False, True):
        if leaking:
            with state.locked(node_dir) as current:
                current["cooling"]["leak_detected"] = True
        served = crawl(view(node_dir))
        chassis = served[resources.CHASSIS]
        members = served[chassis["LeakDetectors"]["@odata.id"]]["Members"]
        current_states = {
            m["@odata.id"].rsplit("/", 1)[1]: served[m["@odata.id"]]["DetectorState"] for m in members
        }
        group = served[f"{resources.THERMAL}/LeakDetection"]["LeakDetectorGroups"][0]["Detectors"]
        deprecated_states = {d["DataSourceUri"].rsplit("/", 1)[1]: d["DetectorState"] for d in group}
        assert (
            current_states
            == deprecated_states
            == dict.fromkeys(("Moisture", "Overflow"), "Critical" if leaking else "OK")
        )
        kinds = {r["Id"]: r["LeakDetectorType"] for r in served.values() if "LeakDetectorType" in r}
        assert set(kinds.values()) <= {"Moisture", "FloatSwitch"} and kinds["Overflow"] == "FloatSwitch"


def test_account_service_has_the_standard_roles_and_the_bmc_account(node_dir: Path) -> None:
    launch.prepare(node_dir.parent / "bmc", "node01", "127.0.0.1", node_dir)
    served = crawl(view(node_dir))
    root = served[resources.ROOT]
    service = served[root["AccountService"]["@odata.id"]]
    roles = [served[m["@odata.id"]] for m in served[service["Roles"]["@odata.id"]]["Members"]]
    assert [r["Id"] for r in roles] == ["Administrator", "Operator", "ReadOnly"]
    # Role.v1_3_3 requires RoleId, the same as Id (DMTF's Service Validator: 3 failures without it)
    assert [r["RoleId"] for r in roles] == [r["Id"] for r in roles]
    assert all("Login" in r["AssignedPrivileges"] for r in roles)
    assert (
        "ConfigureUsers" in roles[0]["AssignedPrivileges"]
        and "ConfigureUsers" not in roles[1]["AssignedPrivileges"]
    )
    (account,) = [served[m["@odata.id"]] for m in served[service["Accounts"]["@odata.id"]]["Members"]]
    assert (account["UserName"], account["RoleId"], account["Password"]) == (
        launch.USERNAME,
        "Administrator",
        None,
    )
    assert served[account["Links"]["Role"]["@odata.id"]]["Id"] == "Administrator"


def test_metadata_references_the_schema_of_every_served_type(node_dir: Path) -> None:
    document = ET.fromstring(odata.metadata())
    edmx, edm = "{http://docs.oasis-open.org/odata/ns/edmx}", "{http://docs.oasis-open.org/odata/ns/edm}"
    included = {i.get("Namespace") for i in document.iter(f"{edmx}Include")}
    served = crawl(view(node_dir)).values()
    for odata_type in {r["@odata.type"] for r in served} | {
        resources.session("0A1B", "admin")["@odata.type"],
        errors.body("NoValidSession")["error"]["@Message.ExtendedInfo"][0]["@odata.type"],
    }:
        parts = odata_type.lstrip("#").split(".")  # Namespace[.vX_Y_Z].Type
        assert parts[0] in included, odata_type
        if len(parts) == 3:
            assert f"{parts[0]}.{parts[1]}" in included, odata_type
    for reference in document.iter(f"{edmx}Reference"):
        namespace = str(reference[0].get("Namespace")).split(".")[0]
        assert reference.get("Uri") == f"http://redfish.dmtf.org/schemas/v1/{namespace}_v1.xml"
    (container,) = document.iter(f"{edm}EntityContainer")
    assert container.get("Extends") == "ServiceRoot.v1_20_0.ServiceContainer"


def test_error_bodies_carry_the_base_registry_message() -> None:
    body = errors.body("ResourceMissingAtURI", "/redfish/v1/Nope")
    assert body["error"]["code"] == "Base.1.18.ResourceMissingAtURI"
    info = body["error"]["@Message.ExtendedInfo"][0]
    assert info["Message"] == "The resource at the URI '/redfish/v1/Nope' was not found."
    assert info["MessageArgs"] == ["/redfish/v1/Nope"] and info["MessageSeverity"] == "Critical"


# -- the service over TLS ---------------------------------------------------------------------
class Client:
    def __init__(self, port: int, ca: Path) -> None:
        self.port, self.context = port, ssl.create_default_context(cafile=str(ca))

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        """(status, headers, the JSON body or None)."""
        data = json.dumps(body).encode() if body is not None else None
        status, answer_headers, raw = self.raw(method, path, data, headers)
        return status, answer_headers, json.loads(raw) if raw else None

    def raw(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, the body as sent), for documents that are not JSON."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=5)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, dict(response.headers), response.read()
        finally:
            conn.close()


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
def bmc(node_dir: Path, tmp_path: Path) -> Iterator[tuple[Client, str, server.Listener]]:
    bmc_dir = tmp_path / "bmc"
    password = launch.prepare(bmc_dir, "node01", "127.0.0.1", node_dir)
    with server.in_process(node_dir, bmc_dir, "node01") as listener:
        assert listener.server is not None
        yield Client(listener.server.server_address[1], bmc_dir / "ca.pem"), password, listener


def test_service_root_is_public_and_everything_else_needs_credentials(bmc: tuple[Client, str, Any]) -> None:
    client, password, _ = bmc
    status, headers, body = client.request("GET", "/redfish/v1/")
    assert status == 200 and headers["OData-Version"] == "4.0" and body["SessionService"]
    assert client.request("GET", "/redfish")[2] == {"v1": "/redfish/v1/"}
    status, headers, body = client.request("GET", resources.CHASSIS)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert body["error"]["code"] == "Base.1.18.NoValidSession"
    status, _, body = client.request("GET", resources.CHASSIS, headers=basic("admin", password + "x"))
    assert status == 401 and body["error"]["code"] == "Base.1.18.ResourceAtUriUnauthorized"
    status, headers, body = client.request("GET", resources.CHASSIS, headers=basic("admin", password))
    assert status == 200 and body["Id"] == "1" and headers["Allow"] == "GET, HEAD"
    # credentials are checked before existence, as real BMCs do
    assert client.request("GET", f"{resources.ROOT}/Nope")[0] == 401


def test_sessions_log_in_and_out(bmc: tuple[Client, str, Any]) -> None:
    client, password, _ = bmc
    sessions = f"{resources.ROOT}/SessionService/Sessions"
    status, headers, body = client.request("POST", sessions, {"UserName": "admin", "Password": password})
    assert status == 201 and headers["Location"] == f"{sessions}/{body['Id']}" and body["UserName"] == "admin"
    token = {"X-Auth-Token": headers["X-Auth-Token"]}
    status, _, listed = client.request("GET", sessions, headers=token)
    assert status == 200 and listed["Members"] == [{"@odata.id": headers["Location"]}]
    assert client.request("GET", f"{resources.THERMAL}/CoolantConnectors", headers=token)[0] == 200
    assert client.request("DELETE", headers["Location"], headers=token)[0] == 204
    status, _, body = client.request("GET", resources.CHASSIS, headers=token)
    assert status == 401 and body["error"]["code"] == "Base.1.18.NoValidSession"
    status, _, body = client.request("POST", sessions, {"UserName": "admin", "Password": "wrong"})
    assert status == 401
    status, _, body = client.request("POST", sessions, {"UserName": "admin"})
    assert status == 400 and body["error"]["@Message.ExtendedInfo"][0]["MessageArgs"] == ["Password"]


def test_session_limit_answers_503(bmc: tuple[Client, str, Any]) -> None:
    client, password, _ = bmc
    sessions = f"{resources.ROOT}/SessionService/Sessions"
    for _ in range(server.MAX_SESSIONS):
        assert client.request("POST", sessions, {"UserName": "admin", "Password": password})[0] == 201
    status, headers, body = client.request("POST", sessions, {"UserName": "admin", "Password": password})
    assert status == 503 and headers["Retry-After"] == "30"
    assert body["error"]["code"] == "Base.1.18.SessionLimitExceeded"


def test_idle_sessions_expire_and_free_their_slots(
    bmc: tuple[Client, str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions left open (a client that never logged out) are gone after SessionTimeout, as on a real
    BMC: neither listed nor counted against the limit, so the next login succeeds."""
    client, password, _ = bmc
    sessions = f"{resources.ROOT}/SessionService/Sessions"
    for _ in range(server.MAX_SESSIONS):
        status, headers, _ = client.request("POST", sessions, {"UserName": "admin", "Password": password})
        assert status == 201
    old_token = {"X-Auth-Token": headers["X-Auth-Token"]}
    assert client.request("POST", sessions, {"UserName": "admin", "Password": password})[0] == 503
    later = time.monotonic() + resources.SESSION_TIMEOUT_S + 1
    monkeypatch.setattr(server.time, "monotonic", lambda: later)
    status, headers, _ = client.request("POST", sessions, {"UserName": "admin", "Password": password})
    assert status == 201
    token = {"X-Auth-Token": headers["X-Auth-Token"]}
    status, _, listed = client.request("GET", sessions, headers=token)
    assert status == 200 and listed["Members"] == [{"@odata.id": headers["Location"]}]
    assert client.request("GET", resources.CHASSIS, headers=old_token)[0] == 401


def test_not_found_and_not_allowed(bmc: tuple[Client, str, Any]) -> None:
    client, password, _ = bmc
    auth = basic("admin", password)
    status, _, body = client.request("GET", f"{resources.THERMAL}/CoolantConnectors/Baseboard9", headers=auth)
    assert status == 404 and body["error"]["code"] == "Base.1.18.ResourceMissingAtURI"
    status, headers, body = client.request("PATCH", resources.CHASSIS, {"AssetTag": "x"}, headers=auth)
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    assert body["error"]["code"] == "Base.1.18.OperationNotAllowed"


def test_faults_take_the_bmc_down_and_change_its_password(
    bmc: tuple[Client, str, Any], node_dir: Path
) -> None:
    client, password, listener = bmc
    auth = basic("admin", password)
    faults.inject(node_dir, "bmc-bad-credentials")
    assert client.request("GET", resources.CHASSIS, headers=auth)[0] == 401
    faults.clear(node_dir, "bmc-bad-credentials")
    assert client.request("GET", resources.CHASSIS, headers=auth)[0] == 200
    faults.inject(node_dir, "bmc-down")
    listener.follow()
    with pytest.raises(ConnectionRefusedError):
        client.request("GET", "/redfish/v1/")
    faults.clear(node_dir, "bmc-down")
    listener.follow()
    assert listener.server is not None
    client.port = listener.server.server_address[1]  # this test's listener takes any free port
    assert client.request("GET", resources.CHASSIS, headers=auth)[0] == 200


def test_tls_is_verified_against_the_fleet_ca(bmc: tuple[Client, str, Any], tmp_path: Path) -> None:
    client, _, _ = bmc
    other = ssl.create_default_context()  # the system CAs do not know the fleet's
    conn = http.client.HTTPSConnection("127.0.0.1", client.port, context=other, timeout=5)
    with pytest.raises(ssl.SSLCertVerificationError):
        conn.request("GET", "/redfish/v1/")
    conn.close()


def test_inventory_passwords_are_ansible_vault_values(tmp_path: Path) -> None:
    from ansible.parsing.utils.yaml import from_yaml

    password_file = vault.ensure_password_file(tmp_path / "vault-password")
    assert password_file.stat().st_mode & 0o077 == 0
    text = yaml.dump(
        {"pw": vault.Vaulted(vault.encrypt("s3cret", password_file))}, Dumper=vault.InventoryDumper
    )
    assert text.startswith("pw: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n") and "s3cret" not in text
    loaded = yaml.load(text, Loader=vault.InventoryLoader)
    assert vault.decrypt(loaded["pw"], password_file) == "s3cret"
    # Ansible's own loader sees an encrypted value, not a string
    assert "s3cret" not in repr(from_yaml(text, json_only=False))


# -- DSP0266 conformance (issue 26: what DMTF's Protocol Validator found) ---------------------------
def test_odata_documents_are_served_without_credentials(bmc: tuple[Client, str, Any]) -> None:
    client, _, _ = bmc
    status, headers, body = client.request("GET", odata.SERVICE_DOCUMENT)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert body["@odata.context"] == "/redfish/v1/$metadata"
    root = client.request("GET", "/redfish/v1/")[2]
    top_level = {k: v["@odata.id"] for k, v in root.items() if isinstance(v, dict) and "@odata.id" in v}
    assert {e["name"]: e["url"] for e in body["value"]} == {"Service": "/redfish/v1/", **top_level}
    assert {"Chassis", "AccountService", "SessionService"} <= top_level.keys()
    assert all(e["kind"] == "Singleton" for e in body["value"])
    for path in ("/redfish/v1/$metadata", "/redfish/v1/%24metadata"):
        status, headers, data = client.raw("GET", path)
        assert status == 200 and headers["Content-Type"] == "application/xml;charset=utf-8"
        assert data == odata.metadata()
    status, headers, data = client.raw("HEAD", "/redfish/v1/$metadata")
    assert status == 200 and data == b"" and int(headers["Content-Length"]) == len(odata.metadata())


def test_an_unsupported_odata_version_is_412(bmc: tuple[Client, str, Any]) -> None:
    client, password, _ = bmc
    assert client.request("GET", "/redfish/v1/", headers={"OData-Version": "4.0"})[0] == 200
    status, _, body = client.request("GET", "/redfish/v1/", headers={"OData-Version": "4.1"})
    assert status == 412 and body["error"]["code"] == "Base.1.18.HeaderInvalid"
    assert body["error"]["@Message.ExtendedInfo"][0]["MessageArgs"] == ["OData-Version: 4.1"]
    auth = {**basic("admin", password), "OData-Version": "3.0"}
    assert client.request("GET", resources.CHASSIS, headers=auth)[0] == 412


def test_sessions_are_created_through_the_members_uri_too(bmc: tuple[Client, str, Any]) -> None:
    client, password, _ = bmc
    sessions = f"{resources.ROOT}/SessionService/Sessions"
    status, headers, body = client.request(
        "POST", f"{sessions}/Members", {"UserName": "admin", "Password": password}
    )
    assert status == 201 and headers["Location"] == f"{sessions}/{body['Id']}"
    token = {"X-Auth-Token": headers["X-Auth-Token"]}
    assert client.request("GET", resources.CHASSIS, headers=token)[0] == 200
    assert client.request("POST", f"{sessions}/Members", {"UserName": "admin", "Password": "x"})[0] == 401
    assert client.request("DELETE", headers["Location"], headers=token)[0] == 204


@pytest.mark.parametrize(
    ("path", "schema"),
    [
        ("/redfish/v1/", "ServiceRoot.v1_20_0.json"),
        (resources.CHASSIS, "Chassis.v1_28_0.json"),
        (f"{resources.ROOT}/Chassis", "ChassisCollection.json"),
        (f"{resources.CHASSIS}/LeakDetectors/Moisture", "LeakDetector.v1_6_0.json"),
        (accounts.ACCOUNT_SERVICE, "AccountService.v1_18_1.json"),
    ],
)
def test_resources_link_their_json_schema(bmc: tuple[Client, str, Any], path: str, schema: str) -> None:
    client, password, _ = bmc
    expected = f"<http://redfish.dmtf.org/schemas/v1/{schema}>; rel=describedby"
    for method in ("GET", "HEAD"):
        status, headers, _ = client.request(method, path, headers=basic("admin", password))
        assert status == 200 and headers["Link"] == expected, method


def test_resources_carry_an_etag_that_follows_their_content(bmc: tuple[Client, str, Any]) -> None:
    """DSP0266: a ManagerAccount's GET carries an ETag (DMTF's Protocol Validator checks it)."""
    client, password, _ = bmc
    account = f"{accounts.ACCOUNTS}/1"
    tags = {client.request(m, account, headers=basic("admin", password))[1]["ETag"] for m in ("GET", "HEAD")}
    assert len(tags) == 1 and tags.pop().startswith('"')
    assert odata.etag({"Id": "1"}) != odata.etag({"Id": "2"})


# -- query parameters: none supported, and ProtocolFeaturesSupported says so --------------------------
# ProtocolFeaturesSupported's feature -> the query parameters it names (DSP0266 "Query parameters")
QUERY_FEATURES = {
    "ExpandQuery": ("$expand=*", "$expand=.($levels=1)"),
    "SelectQuery": ("$select=Id,Name",),
    "FilterQuery": ("$filter=Id%20eq%20'1'",),
    "OnlyMemberQuery": ("only",),
    "ExcerptQuery": ("excerpt",),
    "TopSkipQuery": ("$top=1", "$skip=1"),
    "IncludeOriginOfConditionQuery": ("includeoriginofcondition=true",),
}


def test_protocol_features_supported_lists_no_query_parameter(node_dir: Path) -> None:
    features = resources.service_root(view(node_dir))["ProtocolFeaturesSupported"]
    assert set(QUERY_FEATURES) <= set(features)
    for name in QUERY_FEATURES:
        value = features[name]
        assert value is False or (isinstance(value, dict) and not any(value.values())), name


@pytest.mark.parametrize(
    "asked", [q for qs in QUERY_FEATURES.values() for q in qs] + ["%24expand=.", "$rpvunknown"]
)
def test_an_unsupported_query_parameter_is_501_naming_it(bmc: tuple[Client, str, Any], asked: str) -> None:
    client, password, _ = bmc
    collection = f"{resources.ROOT}/Chassis"
    status, _, body = client.request("GET", f"{collection}?{asked}", headers=basic("admin", password))
    assert status == 501 and body["error"]["code"] == "Base.1.18.QueryParameterUnsupported"
    (named,) = body["error"]["@Message.ExtendedInfo"][0]["MessageArgs"]
    assert named == asked.replace("%24", "$").split("=", 1)[0]
    assert named in body["error"]["message"]
    # the service root too, which needs no credentials
    assert client.request("GET", f"/redfish/v1/?{asked}")[0] == 501


def test_unknown_query_parameters_without_a_dollar_are_ignored(bmc: tuple[Client, str, Any]) -> None:
    client, password, _ = bmc
    auth = basic("admin", password)
    plain = client.request("GET", resources.CHASSIS, headers=auth)
    # names are case-sensitive (OData): `Only` is not Redfish's `only`
    for asked in ("rpvunknown", "foo=bar", "Only"):
        status, _, body = client.request("GET", f"{resources.CHASSIS}?{asked}", headers=auth)
        assert status == 200 and body["Id"] == plain[2]["Id"], asked
    assert query.unsupported("/redfish/v1/Chassis?rpvunknown&$top=2") == "$top"
