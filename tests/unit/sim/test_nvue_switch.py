"""The simulated Cumulus Linux leaf: NVUE-shaped JSON, basic auth, revisions, faults via the state file."""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from gpufleet_sim import faults_switch, nvue, nvue_state

APPLY = {"state": "apply", "auto-prompt": {"ays": "ays_yes"}}


@dataclass
class Leaf:
    port: int
    address: str
    password: str
    state: Path
    ca: Path

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        user: str = nvue_state.USERNAME,
        password: str | None = None,
        auth: bool = True,
    ) -> tuple[int, dict[str, str], Any]:
        context = ssl.create_default_context(cafile=str(self.ca))
        conn = http.client.HTTPSConnection(self.address, self.port, context=context, timeout=5)
        headers = {"Content-Type": "application/json"}
        if auth:
            secret = self.password if password is None else password
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            response = conn.getresponse()
            raw = response.read()
            return response.status, dict(response.headers), json.loads(raw) if raw else None
        finally:
            conn.close()

    def get(self, path: str) -> Any:
        status, _, body = self.request("GET", path)
        assert status == 200, (path, body)
        return body

    def revision(self) -> str:
        status, _, body = self.request("POST", "/nvue_v1/revision")
        assert status == 200 and len(body) == 1
        return str(next(iter(body)))


def start(tmp_path: Path, address: str = "127.0.0.1") -> tuple[Leaf, nvue.Listener]:
    directory = tmp_path / "switches"
    password = nvue.prepare(directory, "leaf01", address, ports=4)
    state = nvue.state_file(directory, "leaf01")
    context = nvue.context_for(directory / "leaf01.pem", directory / "leaf01-key.pem")
    listener = nvue.Listener(state, (address, 0), context).start()
    return Leaf(listener.port, address, password, state, directory / "ca.pem"), listener


@pytest.fixture
def leaf(tmp_path: Path) -> Iterator[Leaf]:
    switch, listener = start(tmp_path)
    try:
        yield switch
    finally:
        listener.stop()


def q(rev: str) -> str:
    return quote(rev, safe="")


# -- shapes ----------------------------------------------------------------------------------
# Keys and value types of the public Cumulus VX 5.5.1 full-tree response (nvue_state's [TREE]).
TREE_QOS_SHAPES = {
    ("roce", "enable"): str,
    ("mapping", "default-global", "trust"): str,
    ("mapping", "default-global", "port-default-sp"): int,
    ("mapping", "default-global", "pcp", "3", "switch-priority"): int,
    ("congestion-control", "default-global", "traffic-class", "0", "ecn"): str,
    ("congestion-control", "default-global", "traffic-class", "0", "red"): str,
    ("congestion-control", "default-global", "traffic-class", "0", "min-threshold"): int,
    ("congestion-control", "default-global", "traffic-class", "0", "max-threshold"): int,
    ("congestion-control", "default-global", "traffic-class", "0", "probability"): int,
    ("egress-queue-mapping", "default-global", "switch-priority", "3", "traffic-class"): int,
    ("egress-scheduler", "default-global", "traffic-class", "0", "bw-percent"): int,
    ("egress-scheduler", "default-global", "traffic-class", "0", "mode"): str,
    ("traffic-pool", "default-lossy", "memory-percent"): int,
}
KEY = re.compile(r"^([a-z][a-z0-9]*(-[a-z0-9]+)*|[0-9]+)$")


def keys(tree: Any) -> Iterator[str]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield key
            yield from keys(value)


def test_the_tree_is_shaped_like_the_public_nvue_response(leaf: Leaf) -> None:
    root = leaf.get("/nvue_v1/?rev=applied")
    assert root["header"]["nvue-api-version"] == "nvue_v1" and root["header"]["version"].startswith("Cumulus")
    for path, kind in TREE_QOS_SHAPES.items():
        assert type(nvue_state.walk(root["qos"], list(path))) is kind, path
    bad = sorted({k for k in keys(root) if not KEY.match(k)} - {"header"})
    assert bad == []
    # switches are strings, never JSON booleans
    assert root["qos"]["roce"] == {"enable": "on", "mode": "lossless"}
    assert root["qos"]["pfc"]["default-global"]["rx"] == "enable"
    assert root["interface"]["swp1"]["link"]["mtu"] == 9216 and root["interface"]["swp1"]["type"] == "swp"
    assert "true" not in json.dumps(root) and "false" not in json.dumps(root)


def test_the_lossless_roce_profile_is_readable_piece_by_piece(leaf: Leaf) -> None:
    mapping = leaf.get("/nvue_v1/qos/mapping/default-global?rev=applied")
    assert mapping["dscp"]["26"] == {"switch-priority": 3} and mapping["dscp"]["48"] == {"switch-priority": 6}
    assert len(mapping["dscp"]) == 64 and mapping["trust"] == "both"
    assert leaf.get("/nvue_v1/qos/pfc/default-global/switch-priority?rev=applied") == {"3": {}}
    tcs = leaf.get("/nvue_v1/qos/congestion-control/default-global/traffic-class?rev=applied")
    assert sorted(tcs) == ["0", "3"] and tcs["3"]["ecn"] == "enable"
    queues = leaf.get("/nvue_v1/qos/egress-queue-mapping/default-global/switch-priority?rev=applied")
    assert queues["3"] == {"traffic-class": 3} and queues["6"] == {"traffic-class": 6}
    assert leaf.get("/nvue_v1/interface/swp2/link/mtu?rev=applied") == 9216


def test_operational_views_summarise_roce_globally_and_per_port(leaf: Leaf) -> None:
    roce = leaf.get("/nvue_v1/qos/roce?rev=operational")
    assert roce["enable"] == "on" and roce["pfc"]["pfc-priority"] == "3"
    assert roce["pfc"]["rx-enabled"] == "enabled" and roce["congestion-control"]["enabled-tc"] == "0,3"
    status = leaf.get("/nvue_v1/interface/swp3/qos/roce/status")  # operational is the default
    assert status["pfc"] == {"pfc-priority": "3", "rx-enabled": "yes", "tx-enabled": "yes"}
    assert status["trust"]["trust-mode"] == "pcp,dscp" and status["mode"] == "lossless"
    # the applied tree has no status: it is operational only
    status_code, _, body = leaf.request("GET", "/nvue_v1/interface/swp3/qos/roce/status?rev=applied")
    assert status_code == 404 and body["status"] == 404


def test_missing_nodes_and_unknown_revisions_are_404(leaf: Leaf) -> None:
    assert leaf.request("GET", "/nvue_v1/interface/swp99")[0] == 404
    assert leaf.request("GET", "/nvue_v1/qos?rev=changeset%2Fnobody%2Fx")[0] == 404
    assert leaf.request("GET", "/redfish/v1")[0] == 404


# -- auth ------------------------------------------------------------------------------------
def test_every_request_needs_the_account(leaf: Leaf) -> None:
    status, headers, body = leaf.request("GET", "/nvue_v1/qos/roce", auth=False)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert body["title"] == "Unauthorized"
    assert leaf.request("GET", "/nvue_v1/qos/roce", password=leaf.password + "x")[0] == 401
    assert leaf.request("GET", "/nvue_v1/qos/roce", user="admin")[0] == 401
    assert leaf.request("POST", "/nvue_v1/revision", auth=False)[0] == 401
    # the state file keeps a salted hash, never the password
    assert leaf.password not in leaf.state.read_text(encoding="utf-8")


def test_a_password_change_in_the_state_takes_effect_at_once(leaf: Leaf) -> None:
    from gpufleet_sim.bmc import passwords

    with nvue_state.locked(leaf.state) as current:
        current["api"].update(passwords.hashed("rotated-password"))
    assert leaf.request("GET", "/nvue_v1/qos/roce")[0] == 401
    assert leaf.request("GET", "/nvue_v1/qos/roce", password="rotated-password")[0] == 200


# -- revisions -------------------------------------------------------------------------------
def test_create_patch_apply_and_read_back(leaf: Leaf) -> None:
    rev = leaf.revision()
    assert re.match(r"^changeset/cumulus/\d{4}-\d\d-\d\d_\d\d\.\d\d\.\d\d_[A-Z0-9]{4}$", rev)
    assert leaf.get(f"/nvue_v1/revision/{q(rev)}") == {
        "state": "pending",
        "transition": {"issue": {}, "progress": ""},
    }
    status, _, body = leaf.request("PATCH", f"/nvue_v1/interface/swp1/link?rev={q(rev)}", {"mtu": 4200})
    assert status == 200 and body == {"mtu": 4200}  # 5.10+: the change is the answer, not the subtree
    status, _, _ = leaf.request(
        "PATCH",
        f"/nvue_v1/qos/congestion-control/default-global/traffic-class/3?rev={q(rev)}",
        {"ecn": "disable"},
    )
    assert status == 200
    # the revision has it, the switch does not yet
    assert leaf.get(f"/nvue_v1/interface/swp1/link/mtu?rev={q(rev)}") == 4200
    assert leaf.get("/nvue_v1/interface/swp1/link/mtu?rev=applied") == 9216
    status, _, body = leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", APPLY)
    assert status == 200 and body["state"] == "apply"
    assert leaf.get(f"/nvue_v1/revision/{q(rev)}")["state"] == "applied"
    assert leaf.get("/nvue_v1/interface/swp1/link/mtu?rev=applied") == 4200
    assert leaf.get("/nvue_v1/interface/swp1/link/mtu?rev=operational") == 4200
    assert leaf.get("/nvue_v1/qos/roce?rev=operational")["congestion-control"]["enabled-tc"] == "0"
    assert leaf.get("/nvue_v1/revision")[rev]["state"] == "applied"
    # an applied revision takes no more changes
    status, _, body = leaf.request("PATCH", f"/nvue_v1/qos/roce?rev={q(rev)}", {"mode": "lossy"})
    assert status == 400 and "not pending" in body["detail"]


def test_a_plain_qos_change_applies_without_the_prompt_answer(leaf: Leaf) -> None:
    rev = leaf.revision()
    leaf.request("PATCH", f"/nvue_v1/qos/pfc/default-global?rev={q(rev)}", {"rx": "disable"})
    assert leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", {"state": "apply"})[0] == 200
    assert leaf.get(f"/nvue_v1/revision/{q(rev)}")["state"] == "applied"
    assert leaf.get("/nvue_v1/qos/pfc/default-global/rx?rev=applied") == "disable"


# The real ays_fail of the guide's "Configuration Apply Fails with Warnings".
AYS_FAIL = {
    "state": "ays_fail",
    "transition": {
        "issue": {
            "0": {
                "code": "client_timeout",
                "data": {},
                "message": "Timeout while waiting for client response",
                "severity": "error",
            }
        },
        "progress": "Aborted apply after warnings",
    },
}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/nvue_v1/interface/eth0/ip/address", {"192.168.200.6/24": {}}),
        ("/nvue_v1/system/api", {"port": 8888}),
        ("/nvue_v1/interface/swp1/link/breakout", {"2x": {}}),
    ],
)
def test_a_disruptive_change_asks_and_fails_without_the_answer(leaf: Leaf, path: str, body: Any) -> None:
    rev = leaf.revision()
    assert leaf.request("PATCH", f"{path}?rev={q(rev)}", body)[0] == 200
    assert leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", {"state": "apply"})[0] == 200
    assert leaf.get(f"/nvue_v1/revision/{q(rev)}") == AYS_FAIL
    assert leaf.request("GET", f"{path}?rev=applied")[0] == 404  # nothing of it applied
    answered = leaf.revision()
    leaf.request("PATCH", f"{path}?rev={q(answered)}", body)
    leaf.request("PATCH", f"/nvue_v1/revision/{q(answered)}", APPLY)
    assert leaf.get(f"/nvue_v1/revision/{q(answered)}")["state"] == "applied"
    assert leaf.get(f"{path}?rev=applied") == body


def test_files_edited_by_hand_make_any_apply_ask(leaf: Leaf) -> None:
    with nvue_state.locked(leaf.state) as current:
        current["files-changed-outside-nvue"] = ["/etc/cumulus/datapath/qos/qos_features.conf"]
    rev = leaf.revision()
    leaf.request("PATCH", f"/nvue_v1/qos/roce?rev={q(rev)}", {"mode": "lossy"})
    leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", {"state": "apply"})
    assert leaf.get(f"/nvue_v1/revision/{q(rev)}")["state"] == "ays_fail"
    assert leaf.get("/nvue_v1/qos/roce/mode?rev=applied") == "lossless"


def test_an_apply_takes_the_time_the_state_says(leaf: Leaf) -> None:
    with nvue_state.locked(leaf.state) as current:
        current["apply-delay-s"] = 0.4
    rev = leaf.revision()
    leaf.request("PATCH", f"/nvue_v1/qos/pfc/default-global?rev={q(rev)}", {"tx": "disable"})
    leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", APPLY)
    assert leaf.get(f"/nvue_v1/revision/{q(rev)}")["state"] == "apply"
    assert leaf.get("/nvue_v1/qos/pfc/default-global/tx?rev=applied") == "enable"
    time.sleep(0.5)
    assert leaf.get(f"/nvue_v1/revision/{q(rev)}")["state"] == "applied"
    assert leaf.get("/nvue_v1/qos/pfc/default-global/tx?rev=applied") == "disable"


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        ("/nvue_v1/interface/swp1/link", {"mtu": 100}, "552..9216"),
        ("/nvue_v1/interface/swp9/link", {"mtu": 9000}, "swp9 does not exist"),
        ("/nvue_v1/qos/roce", {"enable": True}, "one of ['on', 'off']"),
        ("/nvue_v1/qos/mapping/default-global/dscp/64", {"switch-priority": 3}, "dscp 64"),
        ("/nvue_v1/qos/mapping/default-global/dscp/26", {"switch-priority": 8}, "0..7"),
        ("/nvue_v1/", {"routing": {"bgp": {}}}, "'routing' was unexpected"),
    ],
)
def test_values_nvue_would_refuse_are_400(leaf: Leaf, path: str, body: Any, detail: str) -> None:
    rev = leaf.revision()
    status, headers, answer = leaf.request("PATCH", f"{path}?rev={q(rev)}", body)
    assert status == 400 and detail in answer["detail"]
    assert headers["Content-Type"] == "application/problem+json"


def test_a_patch_answers_the_change_with_what_nvue_added(leaf: Leaf) -> None:
    rev = leaf.revision()
    status, _, body = leaf.request("PATCH", f"/nvue_v1/interface?rev={q(rev)}", {"swp2": {}})
    assert status == 200 and body == {"swp2": {"type": "swp"}}  # the guide's 5.10+ example
    status, _, body = leaf.request(
        "PATCH", f"/nvue_v1/?rev={q(rev)}", {"interface": {"swp3": {"link": {"mtu": 9000}}}}
    )
    assert body == {"interface": {"swp3": {"link": {"mtu": 9000}, "type": "swp"}}}
    # null unsets: the key is gone from the revision
    status, _, body = leaf.request("PATCH", f"/nvue_v1/interface/swp4/link?rev={q(rev)}", {"fec": None})
    assert status == 200 and body == {"fec": None}
    assert "fec" not in leaf.get(f"/nvue_v1/interface/swp4/link?rev={q(rev)}")


def test_the_objects_of_a_standard_guide_are_accepted(leaf: Leaf) -> None:
    rev = leaf.revision()
    ntp = {"default": {"server": {"4.cumulusnetworks.pool.ntp.org": {"iburst": "on"}}}}
    status, _, body = leaf.request("PATCH", f"/nvue_v1/service/ntp?rev={q(rev)}", ntp)
    assert status == 200 and body == ntp
    bgp = {"autonomous-system": 65999, "enable": "on", "router-id": "10.10.10.1"}
    assert leaf.request("PATCH", f"/nvue_v1/vrf/default/router/bgp?rev={q(rev)}", bgp)[0] == 200
    leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", {"state": "apply"})
    assert leaf.get(f"/nvue_v1/revision/{q(rev)}")["state"] == "applied"
    assert leaf.get("/nvue_v1/service/ntp?rev=applied") == ntp
    assert leaf.get("/nvue_v1/vrf/default/router/bgp/router-id?rev=applied") == "10.10.10.1"
    assert leaf.get("/nvue_v1/?rev=applied")["acl"] == {}


@pytest.mark.parametrize("method", ["GET", "PATCH"])
def test_a_path_nvue_does_not_have_is_404_with_the_problem_shape(leaf: Leaf, method: str) -> None:
    rev = leaf.revision()
    status, headers, body = leaf.request(method, f"/nvue_v1/routing/bgp?rev={q(rev)}", {"enable": "on"})
    assert status == 404 and headers["Content-Type"] == "application/problem+json"
    assert body["type"] == "about:blank" and body["title"] == "Not Found"
    assert body["detail"].startswith("The requested URL was not found on the server.")
    assert "routing" not in nvue_state.load(leaf.state)["revisions"][rev]["config"]


def test_filled_false_shows_only_what_was_set(leaf: Leaf) -> None:
    assert leaf.get("/nvue_v1/qos?rev=applied&filled=false") == {"roce": {"enable": "on"}}
    assert leaf.get("/nvue_v1/interface/swp1?rev=applied&filled=false") == {"type": "swp"}
    assert leaf.get("/nvue_v1/system?rev=applied&filled=false") == {"hostname": "leaf01"}
    assert leaf.get("/nvue_v1/system/timezone?rev=applied") == "Etc/UTC"  # filled by default
    rev = leaf.revision()
    leaf.request("PATCH", f"/nvue_v1/interface/swp1/link?rev={q(rev)}", {"mtu": 4200})
    leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", {"state": "apply"})
    assert leaf.get("/nvue_v1/interface/swp1?rev=applied&filled=false") == {
        "link": {"mtu": 4200},
        "type": "swp",
    }
    root = leaf.get("/nvue_v1/?rev=applied&filled=false")
    assert root["acl"] == {} and "pfc" not in root["qos"]


def test_an_apply_saves_to_startup_while_auto_save_is_on(leaf: Leaf) -> None:
    rev = leaf.revision()
    leaf.request("PATCH", f"/nvue_v1/interface/swp2/link?rev={q(rev)}", {"mtu": 9000})
    leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", {"state": "apply"})
    assert leaf.get("/nvue_v1/interface/swp2/link/mtu?rev=startup") == 9000


def test_with_auto_save_off_only_a_save_writes_startup(leaf: Leaf) -> None:
    off = leaf.revision()
    leaf.request("PATCH", f"/nvue_v1/system/config/auto-save?rev={q(off)}", {"enable": "off"})
    leaf.request("PATCH", f"/nvue_v1/revision/{q(off)}", {"state": "apply"})
    rev = leaf.revision()
    leaf.request("PATCH", f"/nvue_v1/interface/swp2/link?rev={q(rev)}", {"mtu": 9000})
    leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", {"state": "apply"})
    assert leaf.get("/nvue_v1/interface/swp2/link/mtu?rev=applied") == 9000
    assert leaf.get("/nvue_v1/interface/swp2/link/mtu?rev=startup") == 9216
    pending = leaf.revision()
    status, _, body = leaf.request("PATCH", f"/nvue_v1/revision/{q(pending)}", {"state": "save"})
    assert status == 400 and "not the applied revision" in body["detail"]
    save = {"state": "save", "auto-prompt": {"ays": "ays_yes"}}
    status, _, body = leaf.request("PATCH", "/nvue_v1/revision/applied", save)
    assert status == 200 and body == {"state": "save", "transition": {"issue": {}, "progress": ""}}
    assert leaf.get("/nvue_v1/interface/swp2/link/mtu?rev=startup") == 9000


def test_a_patch_needs_a_pending_revision(leaf: Leaf) -> None:
    assert leaf.request("PATCH", "/nvue_v1/qos/roce", {"mode": "lossy"})[0] == 400
    assert leaf.request("PATCH", "/nvue_v1/qos/roce?rev=applied", {"mode": "lossy"})[0] == 400
    assert leaf.request("PATCH", "/nvue_v1/qos/roce?rev=changeset%2Fx%2Fy", {"mode": "lossy"})[0] == 404
    assert leaf.request("PATCH", "/nvue_v1/revision/changeset%2Fx%2Fy", APPLY)[0] == 404


def test_a_revision_not_applied_can_be_deleted_an_applied_one_cannot(leaf: Leaf) -> None:
    rev = leaf.revision()
    leaf.request("PATCH", f"/nvue_v1/qos/roce?rev={q(rev)}", {"mode": "lossy"})
    assert nvue_state.pending(nvue_state.load(leaf.state)) == [rev]
    assert leaf.request("DELETE", f"/nvue_v1/revision/{q(rev)}")[0] == 200
    assert rev not in leaf.get("/nvue_v1/revision") and nvue_state.pending(nvue_state.load(leaf.state)) == []
    assert leaf.request("DELETE", f"/nvue_v1/revision/{q(rev)}")[0] == 404
    applied = leaf.revision()
    leaf.request("PATCH", f"/nvue_v1/revision/{q(applied)}", APPLY)
    status, _, body = leaf.request("DELETE", f"/nvue_v1/revision/{q(applied)}")
    assert status == 400 and "is applied" in body["detail"]


@pytest.mark.parametrize(("fault", "status"), [("switch-patch-400", 400), ("switch-patch-500", 500)])
def test_service_faults_refuse_or_fail_a_patch_and_leave_it_pending(
    leaf: Leaf, fault: str, status: int
) -> None:
    assert faults_switch.inject_leaf(leaf.state, fault)
    rev = leaf.revision()
    assert leaf.request("PATCH", f"/nvue_v1/qos/roce?rev={q(rev)}", {"mode": "lossy"})[0] == status
    assert leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", APPLY)[0] == 200  # the apply is not faulted
    faults_switch.clear_leaf(leaf.state, fault)
    assert leaf.request("PATCH", "/nvue_v1/qos/roce?rev=x", {"mode": "lossy"})[0] == 404


def test_the_apply_500_fault_leaves_the_revision_pending(leaf: Leaf) -> None:
    faults_switch.inject_leaf(leaf.state, "switch-apply-500")
    rev = leaf.revision()
    assert leaf.request("PATCH", f"/nvue_v1/qos/roce?rev={q(rev)}", {"mode": "lossy"})[0] == 200
    assert leaf.request("PATCH", f"/nvue_v1/revision/{q(rev)}", APPLY)[0] == 500
    assert nvue_state.pending(nvue_state.load(leaf.state)) == [rev]


def _first_bytes(leaf: Leaf, method: str, path: str, count: int) -> tuple[bytes, float]:
    """The first ``count`` bytes of the raw answer and the seconds they took."""
    context = ssl.create_default_context(cafile=str(leaf.ca))
    secret = base64.b64encode(f"{nvue_state.USERNAME}:{leaf.password}".encode()).decode()
    body = b'{"mode": "lossy"}' if method == "PATCH" else b""
    with (
        socket.create_connection((leaf.address, leaf.port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=leaf.address) as tls,
    ):
        tls.sendall(
            f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {secret}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        started, got = time.monotonic(), b""
        while len(got) < count:
            got += tls.recv(count - len(got))
        return got, time.monotonic() - started


def test_the_trickle_fault_sends_every_answer_a_byte_at_a_time(leaf: Leaf) -> None:
    with nvue_state.locked(leaf.state) as current:
        faults_switch.LEAF_FAULTS["switch-trickle"][0](current)
        current["misbehave"]["trickle"] = 0.2  # the fault's 5 s, shortened for the test
    got, took = _first_bytes(leaf, "GET", "/nvue_v1/qos/roce", 4)
    assert got == b"HTTP" and 0.6 <= took < 3


def test_the_slow_patch_fault_takes_the_patch_then_answers_slowly(leaf: Leaf) -> None:
    with nvue_state.locked(leaf.state) as current:
        faults_switch.LEAF_FAULTS["switch-slow-patch"][0](current)
        current["misbehave"]["slow-patch"] = 0.2
    rev = leaf.revision()  # not slowed: only a PATCH is
    got, took = _first_bytes(leaf, "PATCH", f"/nvue_v1/qos/roce?rev={q(rev)}", 3)
    assert got == b"HTTP"[:3] and 0.4 <= took < 3
    assert nvue_state.load(leaf.state)["revisions"][rev]["config"]["qos"]["roce"]["mode"] == "lossy"


# -- the state file: faults and identity -----------------------------------------------------
def test_faults_written_to_the_state_file_are_served(leaf: Leaf) -> None:
    with nvue_state.locked(leaf.state) as current:
        current["applied"]["qos"]["pfc"]["default-global"]["switch-priority"] = {}
        current["applied"]["interface"]["swp2"]["link"]["mtu"] = 1500
    assert leaf.get("/nvue_v1/qos/roce?rev=operational")["pfc"]["pfc-priority"] == ""
    assert leaf.get("/nvue_v1/interface/swp2/link/mtu?rev=applied") == 1500
    # hardware that disagrees with its configuration: operational differs from applied
    with nvue_state.locked(leaf.state) as current:
        current["operational-override"] = {
            "qos": {"mapping": {"default-global": {"dscp": {"26": {"switch-priority": 0}}}}}
        }
    assert leaf.get("/nvue_v1/qos/mapping/default-global/dscp/26?rev=operational") == {"switch-priority": 0}
    assert leaf.get("/nvue_v1/qos/mapping/default-global/dscp/26?rev=applied") == {"switch-priority": 3}


def test_the_lldp_identity_is_kept_in_the_state(leaf: Leaf) -> None:
    lldp = nvue_state.load(leaf.state)["lldp"]
    assert lldp["system-name"] == "leaf01" and lldp["mgmt-ip"] == "127.0.0.1"
    assert sorted(lldp["ports"]) == ["swp1", "swp2", "swp3", "swp4"]
    assert lldp["ports"]["swp3"] == {"id": "swp3", "descr": "swp3"}
    assert re.match(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$", lldp["chassis-id"])
    assert leaf.get("/nvue_v1/system/hostname?rev=applied") == "leaf01"


# -- TLS and the listening address -----------------------------------------------------------
def test_tls_is_verified_against_the_switch_ca_and_binds_the_given_address(tmp_path: Path) -> None:
    switch, listener = start(tmp_path, address="127.0.0.3")
    try:
        assert switch.get("/nvue_v1/system/hostname") == "leaf01"
        other = ssl.create_default_context()  # the system CAs do not know the sim's CA
        conn = http.client.HTTPSConnection("127.0.0.3", switch.port, context=other, timeout=5)
        with pytest.raises(ssl.SSLCertVerificationError):
            conn.request("GET", "/nvue_v1/qos/roce")
        conn.close()
        with pytest.raises(OSError):
            http.client.HTTPSConnection("127.0.0.1", switch.port, timeout=2).request("GET", "/")
    finally:
        listener.stop()


def test_the_command_line_serves_on_a_loopback_address_and_logs_no_password(tmp_path: Path) -> None:
    directory = tmp_path / "switches"
    password = nvue.prepare(directory, "leaf02", "127.0.0.2", ports=2)
    with socket.socket() as sock:
        sock.bind(("127.0.0.2", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "gpufleet_sim.nvue", "--state", str(nvue.state_file(directory, "leaf02"))]
    argv += ["--address", "127.0.0.2", "--port", str(port)]
    argv += ["--cert", str(directory / "leaf02.pem"), "--key", str(directory / "leaf02-key.pem")]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        switch = Leaf(port, "127.0.0.2", password, nvue.state_file(directory, "leaf02"), directory / "ca.pem")
        deadline = time.monotonic() + 20
        while True:
            try:
                assert switch.get("/nvue_v1/system/hostname") == "leaf02"
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the switch did not start"
                time.sleep(0.1)
        assert switch.request("GET", "/nvue_v1/qos", password="wrong")[0] == 401
    finally:
        proc.terminate()  # this test's own process, by its handle
        _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0 and f"https://127.0.0.2:{port}" in stderr
    assert password not in stderr and "wrong" not in stderr
