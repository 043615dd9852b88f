"""Redfish coolant parsing on DMTF's mockups, and the client against a local HTTPS BMC.

FakeBmc serves the DMTF public-cooling-unit tree merged with public-liquid-cooled-server's
Chassis/1U (from tests/fixtures/real/redfish/dmtf) on 127.0.0.1 over TLS, with a CA made
for the test. It enforces basic and session auth as BMCs do and can be told to answer a path
with 503s, a 404 or a hang, so login, logout, retries and errors are tested on the wire.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import secrets
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import redfish_client as rf
from gpufleet_sim.bmc import tls as sim_tls
from gpufleet_sim.https_service import context_for
from gpufleet_sim.ports import free_port

from tests.unit.local_server import LocalServer

DMTF = "redfish/dmtf"
USER, PASSWORD = "gate", "s3cret-Pa55-for-tests"
SESSIONS = "/redfish/v1/SessionService/Sessions"


def load_tree(fixtures: Path) -> dict[str, dict[str, Any]]:
    """URI -> document for the cooling unit, plus the liquid-cooled server's chassis 1U."""
    tree: dict[str, dict[str, Any]] = {}
    for mockup in ("public-cooling-unit", "public-liquid-cooled-server"):
        root = fixtures / DMTF / mockup
        for path in sorted(root.rglob("index.json")):
            rel = path.parent.relative_to(root).as_posix()
            uri = "/redfish/v1" + ("" if rel == "." else "/" + rel)
            tree[uri] = json.loads(path.read_text(encoding="utf-8"))
    chassis = tree["/redfish/v1/Chassis"]
    chassis["Members"].insert(0, {"@odata.id": "/redfish/v1/Chassis/1U"})
    chassis["Members@odata.count"] = len(chassis["Members"])
    return tree


def make_tls(directory: Path) -> tuple[Path, ssl.SSLContext]:
    """A CA and a server certificate for 127.0.0.1, made as the simulated fleet's BMCs' are (sim/bmc/tls:
    what Python 3.13's strict verification asks for); returns (CA PEM path, server context)."""
    cert, key = sim_tls.issue(directory, "server", "127.0.0.1")
    return directory / sim_tls.CA_CERT, context_for(cert, key)


class FakeBmc(LocalServer):
    """A Redfish service on 127.0.0.1 that serves a tree and answers like a BMC."""

    def __init__(self, tree: dict[str, dict[str, Any]], context: ssl.SSLContext | None = None) -> None:
        self.tree = copy.deepcopy(tree)
        self.sessions: dict[str, str] = {}
        self.deleted: list[str] = []
        self.log: list[tuple[str, str, dict[str, str], bytes]] = []
        self.faults: dict[str, list[Any]] = {}
        self.lock = threading.Lock()
        bmc = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, doc: Any = None, headers: dict[str, str] | None = None) -> None:
                body = b"" if doc is None else json.dumps(doc).encode()
                self.send_response(code)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                if body:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _authorized(self) -> bool:
                token = self.headers.get("X-Auth-Token")
                if token:
                    return token in bmc.sessions
                auth = self.headers.get("Authorization", "")
                expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
                return auth == expected

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path.split("?")[0].rstrip("/") or "/"
                with bmc.lock:
                    bmc.log.append((method, path, dict(self.headers), body))
                    fault = bmc.faults.get(path, [None]).pop(0) if bmc.faults.get(path) else None
                if fault == "hang":
                    time.sleep(2.5)
                    return self._send(200, {})
                if fault == "trickle":
                    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}":
                        self.wfile.write(bytes((byte,)))
                        time.sleep(0.4)
                    return None
                if isinstance(fault, tuple):  # (status, Redfish error answer, headers)
                    return self._send(*fault)
                if isinstance(fault, int):
                    return self._send(
                        fault, {"error": {"code": "Base.1.0.GeneralError"}}, {"Retry-After": "0"}
                    )
                if method == "POST" and path == SESSIONS:
                    creds = json.loads(body or b"{}")
                    if creds.get("UserName") != USER or creds.get("Password") != PASSWORD:
                        return self._send(401, {"error": {"code": "Base.1.8.NoValidSession"}})
                    token = secrets.token_hex(16)
                    uri = f"{SESSIONS}/{secrets.token_hex(4)}"
                    bmc.sessions[token] = uri
                    return self._send(
                        201, {"@odata.id": uri, "UserName": USER}, {"X-Auth-Token": token, "Location": uri}
                    )
                if path != "/redfish/v1" and not self._authorized():
                    return self._send(401, {"error": {"code": "Base.1.8.InsufficientPrivilege"}})
                if method == "DELETE":
                    token = self.headers.get("X-Auth-Token")
                    if bmc.sessions.get(token or "") == path:
                        del bmc.sessions[token]
                        bmc.deleted.append(path)
                        return self._send(204)
                    return self._send(404)
                doc = bmc.tree.get(path)
                if doc is None:
                    return self._send(404, {"error": {"code": "Base.1.8.ResourceMissingAtURI"}})
                return self._send(200, doc)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self.serve(Handler)
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if context is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"

    def requests(self, method: str | None = None) -> list[tuple[str, str, dict[str, str], bytes]]:
        return [r for r in self.log if method is None or r[0] == method]


@pytest.fixture(scope="session")
def tree(fixtures_dir: Path) -> dict[str, dict[str, Any]]:
    return load_tree(fixtures_dir)


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    return make_tls(tmp_path_factory.mktemp("bmc-tls"))


@pytest.fixture
def bmc(tree: dict[str, dict[str, Any]], tls: tuple[Path, ssl.SSLContext]) -> Iterator[FakeBmc]:
    with FakeBmc(tree, tls[1]) as server:
        yield server


def client(bmc: FakeBmc, ca: Path | None, **kwargs: Any) -> tuple[rf.RedfishClient, list[float]]:
    slept: list[float] = []
    kwargs.setdefault("username", USER)
    kwargs.setdefault("password", PASSWORD)
    return (
        rf.RedfishClient(
            bmc.url,
            kwargs.pop("username"),
            kwargs.pop("password"),
            ca_path=str(ca) if ca else None,
            sleep=slept.append,
            **kwargs,
        ),
        slept,
    )


# ---------------------------------------------------------------- parsing the mockups


def doc(tree: dict[str, dict[str, Any]], uri: str) -> dict[str, Any]:
    return copy.deepcopy(tree["/redfish/v1/" + uri])


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        (
            "Chassis/1U/ThermalSubsystem/CoolantConnectors/CPU1",
            {
                "id": "CPU1",
                "name": "CPU #1 Cold Plate",
                "health": "OK",
                "state": "Enabled",
                "flow_lpm": None,
                "rated_flow_lpm": 30.0,
                "supply_c": 14.8,
                "return_c": 38.2,
                "delta_c": 23.4,
                "delta_computed": False,
            },
        ),
        (
            "Chassis/1U/ThermalSubsystem/CoolantConnectors/CPU2",
            {
                "id": "CPU2",
                "health": "OK",
                "flow_lpm": None,
                "supply_c": 22.4,
                "return_c": 46.9,
                "delta_c": 24.5,
            },
        ),
        (
            "ThermalEquipment/CDUs/1/PrimaryCoolantConnectors/1",
            {
                "id": "1",
                "name": "Main supply from facility",
                "flow_lpm": 42.0,
                "rated_flow_lpm": 50.0,
                "supply_c": 30.0,
                "return_c": 40.0,
                "delta_c": 10.0,
                "health": "OK",
            },
        ),
        (
            "ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1",
            {"flow_lpm": 42.0, "supply_c": 30.0, "return_c": 48.0, "delta_c": 18.0, "delta_computed": False},
        ),
    ],
)
def test_parse_connector_on_the_mockups(
    tree: dict[str, dict[str, Any]], uri: str, expected: dict[str, Any]
) -> None:
    conn = rf.parse_connector(doc(tree, uri), key="k")
    for key, value in expected.items():
        assert conn[key] == value, key
    assert conn["uri"] == "/redfish/v1/" + uri
    assert conn["key"] == "k"


def test_parse_connector_on_the_schema_guide_example(fixtures_dir: Path) -> None:
    example = json.loads(
        (fixtures_dir / DMTF / "DSP2046-examples/CoolantConnector-v1-example.json").read_text()
    )
    conn = rf.parse_connector(example)
    assert (conn["key"], conn["flow_lpm"], conn["supply_c"], conn["return_c"], conn["delta_c"]) == (
        "A",
        24.3,
        14.8,
        38.2,
        23.4,
    )


def test_delta_is_computed_when_the_bmc_gives_none(tree: dict[str, dict[str, Any]]) -> None:
    cpu1 = doc(tree, "Chassis/1U/ThermalSubsystem/CoolantConnectors/CPU1")
    del cpu1["DeltaTemperatureCelsius"]
    conn = rf.parse_connector(cpu1)
    assert conn["delta_c"] == 23.4
    assert conn["delta_computed"] is True
    del cpu1["ReturnTemperatureCelsius"]
    assert rf.parse_connector(cpu1)["delta_c"] is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"Reading": 42}, 42.0),
        ({"Reading": 0}, 0.0),
        ({"Reading": None}, None),
        ({"Reading": "Null"}, None),
        ({"Reading": True}, None),
        ({"DataSourceUri": "/x"}, None),
        (None, None),
        (12.5, 12.5),
    ],
)
def test_reading(value: Any, expected: float | None) -> None:
    assert rf.reading(value) == expected


def test_missing_status_reads_as_no_health() -> None:
    conn = rf.parse_connector({"Id": "X", "FlowLitersPerMinute": {"Reading": 5}})
    assert (conn["health"], conn["state"], conn["flow_lpm"], conn["supply_c"]) == (None, None, 5.0, None)


def test_leak_detection_groups_of_the_cdu(tree: dict[str, dict[str, Any]]) -> None:
    leak = doc(tree, "ThermalEquipment/CDUs/1/LeakDetection")
    detectors, link = rf.parse_leak_detection(leak)
    assert [(d["name"], d["state"]) for d in detectors] == [
        ("Moisture Leak Detector", "OK"),
        ("Fluid Level Overflow", "OK"),
    ]
    assert link is None  # the mockup's LeakDetection has groups only
    assert rf.leak_state(detectors) == "OK"
    leak["LeakDetectorGroups"][0]["Detectors"][1]["DetectorState"] = "Warning"
    assert rf.leak_state(rf.parse_leak_detection(leak)[0]) == "Warning"


def test_leak_detector_resource(tree: dict[str, dict[str, Any]]) -> None:
    det = rf.parse_leak_detector(doc(tree, "ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors/Overflow"))
    assert det == {
        "name": "Fluid Level Overflow",
        "uri": "/redfish/v1/ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors/Overflow",
        "state": "OK",
    }
    assert rf.parse_leak_detector({"Status": {"State": "Absent"}, "DetectorState": "OK"}) is None


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([], None),
        ([None], None),
        (["OK", "OK"], "OK"),
        (["OK", "Warning"], "Warning"),
        (["Critical", "Warning", "OK"], "Critical"),
        (["OK", "Leaking"], "Leaking"),  # unknown vendor words are not known to be fine
    ],
)
def test_worst(states: list[str | None], expected: str | None) -> None:
    assert rf.worst(states) == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("10.20.1.11", "https://10.20.1.11"),
        ("10.20.1.11:8443", "https://10.20.1.11:8443"),
        ("https://bmc01.mgmt/", "https://bmc01.mgmt"),
        ("http://127.0.0.1:8000/redfish/v1", "http://127.0.0.1:8000"),
    ],
)
def test_normalize_baseuri(given: str, expected: str) -> None:
    assert rf.normalize_baseuri(given) == expected


@pytest.mark.parametrize("given", ["", "ftp://bmc", "https://admin:pw@bmc01"])
def test_normalize_baseuri_refuses(given: str) -> None:
    with pytest.raises(rf.RedfishError) as err:
        rf.normalize_baseuri(given)
    assert "pw" not in str(err.value)


# ---------------------------------------------------------------- the client on the wire


def test_session_discovery_login_and_logout(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    rc, _ = client(bmc, tls[0])
    with rc:
        report = rc.read_coolant()
        token = rc.token
    assert token and bmc.sessions == {}
    assert [r[1] for r in bmc.requests("DELETE")] == bmc.deleted and len(bmc.deleted) == 1
    # Credentials went only into the session POST body; every GET after it carried the token.
    posts = bmc.requests("POST")
    assert [p[1] for p in posts] == [SESSIONS]
    assert json.loads(posts[0][3]) == {"UserName": USER, "Password": PASSWORD}
    gets = bmc.requests("GET")
    assert all("Authorization" not in h for _, _, h, _ in gets)
    assert all(h.get("X-Auth-Token") == token for _, p, h, _ in gets if p != "/redfish/v1")

    assert report["service"] == {
        "baseuri": bmc.url,
        "redfish_version": "1.13.0",
        "uuid": "92384634-2938-2342-8820-489239905423",
    }
    assert [c["key"] for c in report["connectors"]] == ["1U/CPU1", "1U/CPU2"]
    cpu1 = report["connectors"][0]
    assert (cpu1["flow_lpm"], cpu1["supply_c"], cpu1["return_c"], cpu1["delta_c"]) == (None, 14.8, 38.2, 23.4)
    assert cpu1["leak"] is None  # the liquid-cooled server mockup has no leak detectors
    assert [b["id"] for b in report["chassis"]] == ["1U"]  # Chassis/CDU has no ThermalSubsystem

    (cdu,) = report["cdus"]
    assert (cdu["id"], cdu["health"], cdu["health_rollup"], cdu["leak"]) == ("1", "Warning", "Critical", "OK")
    assert {"message": "Pump '2' has failed.", "severity": "Critical"} in cdu["conditions"]
    assert all(c["severity"] != "OK" for c in cdu["conditions"])
    assert [(c["key"], c["side"], c["flow_lpm"], c["delta_c"], c["leak"]) for c in cdu["connectors"]] == [
        ("CDU1/primary/1", "primary", 42.0, 10.0, "OK"),
        ("CDU1/secondary/1", "secondary", 42.0, 18.0, "OK"),
    ]


SIGTERMED_READER = """
import sys, time
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import redfish_client as rf
with rf.RedfishClient(sys.argv[1], sys.argv[2], sys.argv[3], ca_path=sys.argv[4]) as rc:
    rc.login(rc.get(rf.SERVICE_ROOT))
    print("logged in", flush=True)
    time.sleep(60)
"""


def test_a_reader_stopped_by_sigterm_deletes_its_session(
    bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]
) -> None:
    """A gate stopped while a module reads the BMC: the session is deleted, not leaked (a real BMC
    with leaked sessions refuses the next login until they time out)."""
    collections = Path(rf.__file__).parents[6]  # the collections path ansible_collections is found in
    env = dict(os.environ, PYTHONPATH=str(collections))
    argv = [sys.executable, "-c", SIGTERMED_READER, bmc.url, USER, PASSWORD, str(tls[0])]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) as reader:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "logged in"
        assert len(bmc.sessions) == 1
        reader.send_signal(signal.SIGTERM)
        assert reader.wait(timeout=30) == 128 + signal.SIGTERM
    assert bmc.sessions == {} and len(bmc.deleted) == 1


def test_basic_auth_sends_credentials_with_every_request(
    bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]
) -> None:
    rc, _ = client(bmc, tls[0], auth="basic")
    with rc:
        report = rc.read_coolant(chassis_ids=["1U"], cdus=False)
    assert report["cdus"] == [] and len(report["connectors"]) == 2
    assert bmc.requests("POST") == [] and bmc.requests("DELETE") == []
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert all(h.get("Authorization") == expected for _, _, h, _ in bmc.requests("GET"))


@pytest.mark.parametrize("auth", ["session", "basic"])
def test_bad_password_is_an_auth_error_without_the_password(
    bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext], auth: str
) -> None:
    rc, slept = client(bmc, tls[0], auth=auth, password="wrong-Pa55-word")
    with pytest.raises(rf.RedfishError) as err, rc:
        rc.read_coolant()
    assert err.value.kind == "auth" and err.value.status == 401
    assert "rejected the credentials (HTTP 401" in str(err.value)
    assert "wrong-Pa55-word" not in str(err.value) and PASSWORD not in str(err.value)
    assert slept == []  # 401 is never retried


def test_503_is_retried_with_backoff(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    path = "/redfish/v1/Chassis/1U/ThermalSubsystem/CoolantConnectors/CPU2"
    bmc.faults[path] = [503, 503]
    rc, slept = client(bmc, tls[0], retries=3, retry_delay=0.5)
    with rc:
        report = rc.read_coolant(cdus=False)
    assert report["connectors"][1]["supply_c"] == 22.4
    assert rc.retried == 2
    assert slept == [0.0, 0.0]  # the BMC's Retry-After: 0 wins over the backoff
    assert [r[1] for r in bmc.requests("GET")].count(path) == 3


def test_connection_errors_back_off_exponentially() -> None:
    rc = rf.RedfishClient(f"https://127.0.0.1:{free_port()}", USER, PASSWORD, retries=3, retry_delay=0.5)
    slept: list[float] = []
    rc._sleep = slept.append
    with pytest.raises(rf.RedfishError) as err:
        rc.read_coolant()
    assert err.value.kind == "connection"
    assert "connection refused" in str(err.value) and "3 retries" in str(err.value)
    assert slept == [0.5, 1.0, 2.0]
    assert PASSWORD not in str(err.value)


def test_503_that_persists_gives_up(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    bmc.faults["/redfish/v1/Chassis"] = [503] * 10
    rc, slept = client(bmc, tls[0], retries=2)
    with pytest.raises(rf.RedfishError) as err, rc:
        rc.read_coolant()
    assert (err.value.kind, err.value.status) == ("http", 503)
    assert "HTTP 503 after 2 retries" in str(err.value)
    assert len(slept) == 2
    assert len(bmc.deleted) == 1  # the session opened before the failure is still closed


def test_404_names_the_missing_resource(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    del bmc.tree["/redfish/v1/Chassis/1U/ThermalSubsystem/CoolantConnectors"]
    rc, slept = client(bmc, tls[0])
    with pytest.raises(rf.RedfishError) as err, rc:
        rc.read_coolant()
    assert (err.value.kind, err.value.status) == ("not_found", 404)
    assert "/redfish/v1/Chassis/1U/ThermalSubsystem/CoolantConnectors (HTTP 404)" in str(err.value)
    assert slept == []


def test_unknown_chassis_is_named(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    rc, _ = client(bmc, tls[0])
    with pytest.raises(rf.RedfishError) as err, rc:
        rc.read_coolant(chassis_ids=["GPU_Board_0"])
    assert err.value.kind == "not_found"
    assert "no chassis GPU_Board_0 with a ThermalSubsystem; it has: none" in str(err.value)


def test_tls_is_verified_by_default(bmc: FakeBmc) -> None:
    rc, slept = client(bmc, None)
    with pytest.raises(rf.RedfishError) as err:
        rc.read_coolant()
    assert err.value.kind == "tls"
    assert "set ca_path" in str(err.value)
    assert slept == []  # a certificate problem does not go away on retry
    # validate_certs false reads it (a lab's escape hatch).
    rc, _ = client(bmc, None, validate_certs=False)
    with rc:
        assert len(rc.read_coolant(cdus=False)["connectors"]) == 2


@pytest.mark.parametrize("fault", ["hang", "trickle"])
def test_a_bmc_that_does_not_answer_in_time_is_given_up_at_the_deadline(
    bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext], fault: str
) -> None:
    """Silent (hang), or a byte every 0.4 s (trickle: a per-read socket timeout of 1 s would never
    fire): given up at the whole answer's deadline, and not tried again."""
    bmc.faults["/redfish/v1"] = [fault]
    rc, _ = client(bmc, tls[0], timeout=1, retries=3)
    started = time.monotonic()
    with pytest.raises(rf.RedfishError) as err:
        rc.read_coolant()
    assert err.value.kind == "deadline" and 1 <= time.monotonic() - started < 1.5
    assert "did not answer GET /redfish/v1 in full within 1s" in str(err.value)
    assert rc.requests == 1  # a deadline is not tried again


def test_an_answer_over_the_size_limit_is_refused(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    rc, _ = client(bmc, tls[0], max_body=100)
    with pytest.raises(rf.RedfishError) as err:
        rc.read_coolant()
    assert err.value.kind == "too_large"
    assert "answered GET /redfish/v1 with more than 100 bytes" in str(err.value)


def test_sessions_not_supported_suggests_basic(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    bmc.faults[SESSIONS] = [405]
    rc, _ = client(bmc, tls[0])
    with pytest.raises(rf.RedfishError) as err:
        rc.read_coolant()
    assert "does not accept Redfish sessions" in str(err.value) and "auth: basic" in str(err.value)


DEPRECATED_LEAK = "/redfish/v1/Chassis/1U/ThermalSubsystem/LeakDetection"
CURRENT_LEAK = "/redfish/v1/Chassis/1U/LeakDetectors"


def serve_deprecated_leak_detection(bmc: FakeBmc, moisture_state: str) -> None:
    """Chassis 1U's detectors under ThermalSubsystem/LeakDetection (deprecated; older firmware):
    the CDU mockup's groups, its moisture detector in ``moisture_state``."""
    bmc.tree["/redfish/v1/Chassis/1U/ThermalSubsystem"]["LeakDetection"] = {"@odata.id": DEPRECATED_LEAK}
    leak = copy.deepcopy(bmc.tree["/redfish/v1/ThermalEquipment/CDUs/1/LeakDetection"])
    leak["@odata.id"] = DEPRECATED_LEAK
    leak["LeakDetectorGroups"][0]["Detectors"][0]["DetectorState"] = moisture_state
    bmc.tree[DEPRECATED_LEAK] = leak


def serve_chassis_leak_detectors(bmc: FakeBmc, moisture_state: str | None) -> None:
    """Chassis 1U's LeakDetectors collection (Chassis v1_26+), shaped as the cooling unit mockup's
    Chassis/CDU/LeakDetectors; empty when ``moisture_state`` is None."""
    bmc.tree["/redfish/v1/Chassis/1U"]["LeakDetectors"] = {"@odata.id": CURRENT_LEAK}
    members = []
    if moisture_state is not None:
        for ident in ("Moisture", "Overflow"):
            detector = copy.deepcopy(bmc.tree[f"/redfish/v1/Chassis/CDU/LeakDetectors/{ident}"])
            detector["@odata.id"] = f"{CURRENT_LEAK}/{ident}"
            if ident == "Moisture":
                detector["DetectorState"] = moisture_state
            bmc.tree[f"{CURRENT_LEAK}/{ident}"] = detector
            members.append({"@odata.id": f"{CURRENT_LEAK}/{ident}"})
    bmc.tree[CURRENT_LEAK] = {
        "Members": members,
        "Members@odata.count": len(members),
        "@odata.id": CURRENT_LEAK,
    }


def read_leaks(bmc: FakeBmc, ca: Path) -> dict[str, Any]:
    rc, _ = client(bmc, ca)
    with rc:
        report: dict[str, Any] = rc.read_coolant(cdus=False)
    return report


def test_leak_detectors_only_under_the_deprecated_leak_detection(
    bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]
) -> None:
    """Older firmware: LeakDetection under the ThermalSubsystem, no Chassis.LeakDetectors; the
    connectors inherit its state."""
    serve_deprecated_leak_detection(bmc, "Critical")
    report = read_leaks(bmc, tls[0])
    assert report["chassis"][0]["leak"] == "Critical"
    assert [c["leak"] for c in report["connectors"]] == ["Critical", "Critical"]
    assert [(d["name"], d["state"]) for d in report["chassis"][0]["leak_detectors"]] == [
        ("Moisture Leak Detector", "Critical"),
        ("Fluid Level Overflow", "OK"),
    ]


def test_leak_detectors_only_in_the_chassis_collection(
    bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]
) -> None:
    """Current firmware without the deprecated path: Chassis.LeakDetectors, one GET per detector,
    in the same report shape."""
    serve_chassis_leak_detectors(bmc, "Warning")
    report = read_leaks(bmc, tls[0])
    assert report["chassis"][0]["leak_detectors"] == [
        {"name": "Moisture Leak Detector", "uri": f"{CURRENT_LEAK}/Moisture", "state": "Warning"},
        {"name": "Fluid Level Overflow", "uri": f"{CURRENT_LEAK}/Overflow", "state": "OK"},
    ]
    assert report["chassis"][0]["leak"] == "Warning"
    assert [c["leak"] for c in report["connectors"]] == ["Warning", "Warning"]


def test_the_chassis_collection_is_read_before_the_deprecated_path(
    bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]
) -> None:
    """Both served and disagreeing: the current collection wins and the deprecated one is not read."""
    serve_deprecated_leak_detection(bmc, "OK")
    serve_chassis_leak_detectors(bmc, "Critical")
    report = read_leaks(bmc, tls[0])
    assert report["chassis"][0]["leak"] == "Critical"
    assert DEPRECATED_LEAK not in [path for _, path, _, _ in bmc.requests("GET")]


def test_an_empty_chassis_collection_falls_back_to_the_deprecated_path(
    bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]
) -> None:
    """Firmware that links an empty LeakDetectors but still reports under LeakDetection."""
    serve_deprecated_leak_detection(bmc, "Warning")
    serve_chassis_leak_detectors(bmc, None)
    report = read_leaks(bmc, tls[0])
    assert report["chassis"][0]["leak"] == "Warning"
    assert [path for _, path, _, _ in bmc.requests("GET")].count(DEPRECATED_LEAK) == 1


def test_collections_follow_next_link(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    coll = bmc.tree["/redfish/v1/Chassis/1U/ThermalSubsystem/CoolantConnectors"]
    second = coll["Members"].pop()
    coll["Members@odata.nextLink"] = "/redfish/v1/Chassis/1U/ThermalSubsystem/CoolantConnectors/page2"
    bmc.tree["/redfish/v1/Chassis/1U/ThermalSubsystem/CoolantConnectors/page2"] = {"Members": [second]}
    rc, _ = client(bmc, tls[0])
    with rc:
        assert [c["id"] for c in rc.read_coolant(cdus=False)["connectors"]] == ["CPU1", "CPU2"]


def test_absent_connectors_are_left_out(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    bmc.tree["/redfish/v1/Chassis/1U/ThermalSubsystem/CoolantConnectors/CPU2"]["Status"]["State"] = "Absent"
    rc, _ = client(bmc, tls[0])
    with rc:
        assert [c["id"] for c in rc.read_coolant(cdus=False)["connectors"]] == ["CPU1"]


# ---------------------------------------------------------------- transport: plain HTTP and the CA file


@pytest.fixture
def http_bmc(tree: dict[str, dict[str, Any]]) -> Iterator[FakeBmc]:
    """The same BMC without TLS: whatever reaches it crossed the network in clear text."""
    with FakeBmc(tree) as server:
        yield server


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_plain_http_is_refused_before_anything_is_sent(http_bmc: FakeBmc, reason: str | None) -> None:
    """An http:// BMC got the vaulted password POSTed in clear text (issue 11)."""
    with pytest.raises(rf.RedfishError) as err:
        rf.RedfishClient(http_bmc.url, USER, PASSWORD, insecure_http_reason=reason).read_coolant()
    assert err.value.kind == "config"
    message = str(err.value)
    assert f"BMC address {http_bmc.url} is plain HTTP" in message
    assert "thermal_gate_bmc_address" in message and "gpufleet_bmc_address" in message
    assert "thermal_gate_bmc_insecure_http_reason" in message and "https://" in message
    assert http_bmc.log == []  # not one request, so no password on the wire
    assert PASSWORD not in message


def test_plain_http_with_a_reason_is_read_and_the_reason_reported(http_bmc: FakeBmc) -> None:
    reason = "CHG-4711: lab BMC  without TLS firmware,\nisolated VLAN"
    rc = rf.RedfishClient(http_bmc.url, USER, PASSWORD, insecure_http_reason=reason, sleep=lambda _: None)
    with rc:
        assert len(rc.read_coolant(cdus=False)["connectors"]) == 2
    assert rc.transport_hint == (
        f"BMC {http_bmc.url} is read over plain HTTP (its password crosses the network in clear text), "
        "allowed by insecure_http_reason (thermal_gate_bmc_insecure_http_reason): "
        "CHG-4711: lab BMC without TLS firmware, isolated VLAN"
    )


def test_https_has_no_transport_hint(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    rc, _ = client(bmc, tls[0], insecure_http_reason="not needed")
    assert rc.transport_hint is None


def test_a_link_to_plain_http_is_not_followed(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    """An https BMC linking to http:// on itself would take the session token to plain HTTP."""
    plain = bmc.url.replace("https://", "http://")
    bmc.tree["/redfish/v1"]["Chassis"] = {"@odata.id": plain + "/redfish/v1/Chassis"}
    rc, _ = client(bmc, tls[0])
    with pytest.raises(rf.RedfishError) as err, rc:
        rc.read_coolant()
    assert err.value.kind == "protocol" and "linked outside itself" in str(err.value)
    assert not any(p == "/redfish/v1/Chassis" for _, p, _, _ in bmc.log)


def _garbage_ca(directory: Path) -> Path:
    path = directory / "garbage.pem"
    path.write_text("this is not a certificate\n")
    return path


def _key_only_ca(directory: Path) -> Path:
    path = directory / "key.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    return path


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda d: d / "missing-ca.pem", "does not exist on the controller"),
        (lambda d: d, "is a directory, not a PEM file"),
        (_garbage_ca, "holds no PEM certificate OpenSSL can load"),
        (_key_only_ca, "holds no PEM certificate OpenSSL can load"),
    ],
)
def test_a_bad_ca_file_is_a_local_error_at_once(
    bmc: FakeBmc, tmp_path: Path, make: Any, problem: str
) -> None:
    """A missing or garbage CA file was 'could not reach BMC ... check the address' after three retries."""
    ca = make(tmp_path)
    slept: list[float] = []
    with pytest.raises(rf.RedfishError) as err:
        rf.RedfishClient(bmc.url, USER, PASSWORD, ca_path=str(ca), sleep=slept.append).read_coolant()
    assert err.value.kind == "config"
    assert f"CA file {ca} {problem}" in str(err.value)
    assert "thermal_gate_bmc_ca_path" in str(err.value)
    assert "could not reach" not in str(err.value)
    assert bmc.log == [] and slept == []


# DMTF's Base message registry (Base.1.19.0): the answer of a BMC whose session limit is full.
SESSION_LIMIT = {
    "error": {
        "code": "Base.1.19.GeneralError",
        "message": "A general error has occurred. See ExtendedInfo for more information.",
        "@Message.ExtendedInfo": [
            {
                "@odata.type": "#Message.v1_1_2.Message",
                "MessageId": "Base.1.19.SessionLimitExceeded",
                "Message": "The session establishment failed due to the number of simultaneous sessions "
                "exceeding the limit of the implementation.",
                "Severity": "Critical",
                "Resolution": "Reduce the number of other sessions before trying to establish the session.",
            }
        ],
    }
}


def test_a_full_session_limit_is_said_at_once_as_the_bmc_said_it(
    bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]
) -> None:
    """Retrying cannot free a session within seconds: no 3 x 30 s of Retry-After, no "busy or restarting"."""
    bmc.faults[SESSIONS] = [(503, SESSION_LIMIT, {"Retry-After": "30"})] * 4
    rc, slept = client(bmc, tls[0], retries=3)
    with pytest.raises(rf.RedfishError) as err, rc:
        rc.read_coolant()
    message = str(err.value)
    assert (err.value.kind, err.value.status) == ("http", 503)
    assert err.value.message_ids == ("Base.1.19.SessionLimitExceeded",)
    assert slept == [] and len(bmc.requests("POST")) == 1
    assert f"refused POST {SESSIONS} with HTTP 503: its session limit is full" in message
    assert (
        "the BMC said: Base.1.19.SessionLimitExceeded: The session establishment failed due to the number of "
        "simultaneous sessions exceeding the limit of the implementation. Not retried"
    ) in message
    assert "busy or restarting" not in message


def test_a_503_of_another_message_is_retried_and_its_message_named(
    bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]
) -> None:
    busy = {"error": {"code": "Base.1.19.ServiceTemporarilyUnavailable", "message": "Retry in a moment."}}
    bmc.faults["/redfish/v1/Chassis"] = [(503, busy, {"Retry-After": "0"})] * 10
    rc, slept = client(bmc, tls[0], retries=2)
    with pytest.raises(rf.RedfishError) as err, rc:
        rc.read_coolant()
    assert slept == [0.0, 0.0]
    assert str(err.value).endswith(
        "HTTP 503 after 2 retries; the BMC is busy or restarting, try again later; "
        "the BMC said: Base.1.19.ServiceTemporarilyUnavailable: Retry in a moment."
    )


def test_what_the_bmc_said_never_carries_the_password(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    echo = {
        "error": {
            "@Message.ExtendedInfo": [
                {"MessageId": "Base.1.19.PropertyValueIncorrect", "Message": f"'{PASSWORD}'\x1b[2J is wrong"}
            ]
        }
    }
    bmc.faults[SESSIONS] = [(400, echo, {})]
    rc, _ = client(bmc, tls[0])
    with pytest.raises(rf.RedfishError) as err, rc:
        rc.read_coolant()
    assert PASSWORD not in str(err.value) and "\x1b" not in str(err.value)
    assert str(err.value).endswith("the BMC said: Base.1.19.PropertyValueIncorrect: '********' [2J is wrong")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            json.dumps(SESSION_LIMIT).encode(),
            [
                (
                    "Base.1.19.SessionLimitExceeded",
                    SESSION_LIMIT["error"]["@Message.ExtendedInfo"][0]["Message"],
                )
            ],
        ),
        (b'{"error": {"code": "Base.1.0.GeneralError"}}', [("Base.1.0.GeneralError", "")]),
        (b'{"error": {"message": "no"}}', [("", "no")]),
        (b'{"error": {"@Message.ExtendedInfo": [1, {"MessageId": 5}]}, "code": "x"}', []),
        (b"<html>busy</html>", []),
        (b"", []),
        (b'{"error": "busy"}', []),
        (b"[" * 100_000, []),
    ],
    ids=[
        "extended info",
        "code only",
        "message only",
        "no usable info",
        "html",
        "empty",
        "error a string",
        "deep",
    ],
)
def test_error_messages(body: bytes, expected: list[tuple[str, str]]) -> None:
    assert rf.error_messages(body) == expected


def test_error_messages_of_the_simulated_bmc_s_session_limit() -> None:
    """The simulated BMC answers a login past its session limit with DMTF's Base registry message."""
    from gpufleet_sim.bmc import errors

    answer = errors.body("SessionLimitExceeded")
    [(message_id, message)] = rf.error_messages(json.dumps(answer).encode())
    assert message_id == f"{errors.REGISTRY}.SessionLimitExceeded" and message.startswith("The session")
    assert rf._not_retried([message_id])
