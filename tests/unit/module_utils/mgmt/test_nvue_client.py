"""The NVUE client against the simulated Cumulus Linux leaf over TLS, and its pure helpers."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.parse import quote

import pytest
from ansible.module_utils.urls import open_url
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import nvue_client as nc
from gpufleet_sim import faults_switch, nvue, nvue_state
from gpufleet_sim.ports import free_port

from tests.unit.module_utils.conftest import Leaf


class Counting:
    """open_url, counting the requests by (method, path)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, url: str, **kwargs: Any) -> Any:
        self.calls.append((kwargs.get("method", "GET"), url.split("/nvue_v1", 1)[-1]))
        return open_url(url, **kwargs)

    def methods(self) -> list[str]:
        return [m for m, _ in self.calls]


def client(leaf: Leaf, opener: Any = None, **options: Any) -> nc.NvueClient:
    options.setdefault("ca_path", str(leaf.ca))
    options.setdefault("sleep", lambda s: None)
    return nc.NvueClient(
        leaf.address, "cumulus", leaf.password, name="leaf01", opener=opener or open_url, **options
    )


# -- reading ---------------------------------------------------------------------------------
def test_reads_roce_qos_and_interfaces_applied_and_operational(leaf: Leaf) -> None:
    switch = client(leaf)
    assert switch.transport_hint is None
    roce = switch.read_roce("operational")
    assert roce["enable"] == "on" and roce["pfc"]["pfc-priority"] == "3"
    assert switch.read_roce("applied") == {"enable": "on", "mode": "lossless"}
    qos = switch.read_qos("applied")
    assert qos["mapping"]["default-global"]["dscp"]["26"]["switch-priority"] == 3
    assert qos["congestion-control"]["default-global"]["traffic-class"]["3"]["ecn"] == "enable"
    assert switch.read_interface("swp5", "applied")["link"]["mtu"] == 9216
    status = switch.port_roce_status("swp5")
    assert status["pfc"] == {"pfc-priority": "3", "rx-enabled": "yes", "tx-enabled": "yes"}


def test_a_switch_is_read_once_per_run_whatever_the_number_of_ports(leaf: Leaf) -> None:
    counting = Counting()
    switch = client(leaf, counting)
    for port in ("swp1", "swp2", "swp3", "swp4", "swp5", "swp6", "swp7", "swp8"):
        assert switch.read_interface(port, "operational")["link"]["mtu"] == 9216
        assert switch.port_roce_status(port)["mode"] == "lossless"
        assert switch.read_interface(port, "applied")["type"] == "swp"
        switch.read_roce("operational")
        switch.read_qos("applied")
    assert sorted(counting.calls) == [
        ("GET", "/interface?rev=applied"),
        ("GET", "/interface?rev=operational"),
        ("GET", "/qos?rev=applied"),
        ("GET", "/qos?rev=operational"),
    ]
    # a node inside a subtree already read costs no request
    assert switch.get("qos/pfc/default-global", "applied")["rx"] == "enable"
    assert switch.plan(FIX) == [] and len(counting.calls) == 4
    # callers get copies: one caller's edit does not change what the next one reads
    switch.read_qos("applied")["pfc"]["default-global"]["rx"] = "disable"
    assert switch.read_qos("applied")["pfc"]["default-global"]["rx"] == "enable"


def test_client_for_shares_one_client_per_switch(leaf: Leaf) -> None:
    one = nc.client_for(leaf.address, "cumulus", leaf.password, ca_path=str(leaf.ca))
    two = nc.client_for("https://" + leaf.address, "cumulus", leaf.password, ca_path=str(leaf.ca))
    assert one is two
    assert nc.client_for(leaf.address, "cumulus", "other", ca_path=str(leaf.ca)) is not one


def test_a_port_the_switch_lacks_is_not_found(leaf: Leaf) -> None:
    with pytest.raises(nc.NvueError) as caught:
        client(leaf).read_interface("swp99")
    assert caught.value.kind == "not_found" and "leaf01" in str(caught.value) and "swp99" in str(caught.value)


# -- changing --------------------------------------------------------------------------------
def break_pfc(leaf: Leaf) -> None:
    """The switch-pfc-off fault as the fleet will inject it: PFC off on the RoCE priority."""
    with nvue_state.locked(leaf.state) as current:
        pfc = current["applied"]["qos"]["pfc"]["default-global"]
        pfc["switch-priority"], pfc["rx"], pfc["tx"] = {}, "disable", "disable"


FIX = {"qos/pfc/default-global": {"switch-priority": {"3": {}}, "rx": "enable", "tx": "enable"}}


def test_plan_reports_the_changes_and_writes_nothing(leaf: Leaf) -> None:
    break_pfc(leaf)
    counting = Counting()
    changes = client(leaf, counting).plan(FIX)
    assert changes == [
        {"setting": "qos/pfc/default-global/rx", "from": "disable", "to": "enable"},
        {"setting": "qos/pfc/default-global/switch-priority/3", "from": None, "to": "present"},
        {"setting": "qos/pfc/default-global/tx", "from": "disable", "to": "enable"},
    ]
    assert counting.methods() == ["GET"] and nvue_state.load(leaf.state)["revisions"] == {}


def test_apply_goes_through_a_revision_and_reads_back(leaf: Leaf) -> None:
    break_pfc(leaf)
    counting = Counting()
    switch = client(leaf, counting)
    assert switch.read_roce("operational")["pfc"]["pfc-priority"] == ""
    result = switch.apply(FIX)
    assert result["changed"] is True and len(result["changes"]) == 3
    assert result["revision"].startswith("changeset/cumulus/")
    assert counting.methods() == ["GET", "GET", "POST", "PATCH", "PATCH", "GET"]
    assert counting.calls[3][1].startswith("/qos/pfc/default-global?rev=changeset%2Fcumulus%2F")
    # the revision id travels as one path segment, its slashes encoded
    assert counting.calls[4][1] == "/revision/" + quote(result["revision"], safe="")
    assert counting.calls[5][1] == counting.calls[4][1]
    # the cache was dropped: the read after the change asks the switch again
    roce = switch.read_roce("operational")
    assert roce["pfc"] == {
        "pfc-priority": "3",
        "rx-enabled": "enabled",
        "tx-enabled": "enabled",
        "cable-length": 100,
    }
    assert nvue_state.load(leaf.state)["revisions"][result["revision"]]["state"] == "applied"
    # a second run changes nothing and creates no revision
    again = client(leaf, counting)
    counting.calls.clear()
    assert again.apply(FIX) == {"changed": False, "changes": [], "revision": None}
    assert counting.methods() == ["GET"]


def test_apply_on_interface_paths(leaf: Leaf) -> None:
    with nvue_state.locked(leaf.state) as current:
        current["applied"]["interface"]["swp3"]["link"]["mtu"] = 1500  # switch-mtu-low
    switch = client(leaf)
    result = switch.apply({"interface/swp3/link": {"mtu": 9216}, "interface/swp4/link": {"mtu": 9216}})
    assert result["changes"] == [{"setting": "interface/swp3/link/mtu", "from": 1500, "to": 9216}]
    assert switch.read_interface("swp3", "applied")["link"]["mtu"] == 9216


def test_apply_waits_for_the_revision_and_gives_up_at_the_timeout(leaf: Leaf) -> None:
    with nvue_state.locked(leaf.state) as current:
        current["apply-delay-s"] = 3600.0
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    switch = client(leaf, sleep=sleep, clock=lambda: now[0])
    with pytest.raises(nc.NvueError) as caught:
        switch.apply({"qos/roce": {"mode": "lossy"}}, timeout=5, poll=1)
    assert caught.value.kind == "timeout" and "within 5s (it is apply," in str(caught.value)
    assert caught.value.revision_state == "apply"  # applying: not deleted, named
    assert "leaf01" in str(caught.value) and now[0] >= 5


def test_a_value_the_switch_refuses_is_an_error_with_its_reason(leaf: Leaf) -> None:
    with pytest.raises(nc.NvueError) as caught:
        client(leaf).apply({"interface/swp1/link": {"mtu": 100}})
    assert caught.value.kind == "refused" and caught.value.status == 400
    assert "552..9216" in str(caught.value) and "leaf01" in str(caught.value)
    assert nvue_state.load(leaf.state)["applied"]["interface"]["swp1"]["link"]["mtu"] == 9216


def test_a_failed_revision_names_its_state_and_issue() -> None:
    answers = iter(
        [
            {"roce": {"enable": "off"}},
            {"changeset/u/x": {"state": "pending"}},
            {},
            {"state": "apply"},
            {"state": "apply_fail", "transition": {"issue": {"0": {"message": "switchd reload failed"}}}},
            {},  # DELETE of the failed revision
        ]
    )

    def opener(url: str, **kwargs: Any) -> Any:
        return io.BytesIO(json.dumps(next(answers)).encode())

    switch = nc.NvueClient("leaf01", "u", "pw", opener=opener, sleep=lambda s: None)
    with pytest.raises(nc.NvueError) as caught:
        switch.apply({"qos": {"roce": {"enable": "on"}}})
    assert caught.value.kind == "apply"
    assert "is apply_fail (switchd reload failed)" in str(caught.value)
    assert "revision changeset/u/x (apply_fail) was deleted" in str(caught.value)
    assert (caught.value.revision, caught.value.revision_state) == ("changeset/u/x", "deleted")


# -- no revision left behind, no request without an end --------------------------------------
def left_behind(leaf: Leaf) -> list[str]:
    """The revisions on the leaf that are neither applied nor applying."""
    return nvue_state.pending(nvue_state.load(leaf.state))


def applied_mtu(leaf: Leaf) -> int:
    mtu: int = nvue_state.load(leaf.state)["applied"]["interface"]["swp1"]["link"]["mtu"]
    return mtu


def test_a_patch_the_switch_refuses_leaves_no_revision(leaf: Leaf) -> None:
    with pytest.raises(nc.NvueError) as caught:
        client(leaf).apply({"interface/swp999/link": {"mtu": 9216}})
    assert caught.value.kind == "refused" and caught.value.status == 400
    assert "swp999 does not exist" in str(caught.value)
    assert caught.value.revision_state == "deleted" and "was deleted: nothing of it applied" in str(
        caught.value
    )
    assert left_behind(leaf) == [] and nvue_state.load(leaf.state)["revisions"] == {}


@pytest.mark.parametrize(
    ("fault", "kind", "status"),
    [
        ("switch-patch-400", "refused", 400),
        ("switch-patch-500", "http", 500),
        ("switch-apply-500", "http", 500),
        ("switch-slow-patch", "deadline", None),
    ],
)
def test_a_failed_change_leaves_no_pending_revision(leaf: Leaf, fault: str, kind: str, status: Any) -> None:
    with nvue_state.locked(leaf.state) as current:
        current["applied"]["interface"]["swp1"]["link"]["mtu"] = 1500
    assert faults_switch.inject_leaf(leaf.state, fault)
    with pytest.raises(nc.NvueError) as caught:
        client(leaf, timeout=2).apply({"interface/swp1/link": {"mtu": 9216}})
    assert (caught.value.kind, caught.value.status) == (kind, status), caught.value
    assert caught.value.revision and caught.value.revision_state == "deleted", caught.value
    assert f"revision {caught.value.revision} (pending) was deleted" in str(caught.value)
    assert left_behind(leaf) == [] and applied_mtu(leaf) == 1500


def test_a_trickling_switch_is_given_up_at_the_deadline(leaf: Leaf) -> None:
    """One byte every 5 s (status line and headers too): a per-read timeout of 3 s never fires."""
    assert faults_switch.inject_leaf(leaf.state, "switch-trickle")
    switch = client(leaf, timeout=3)
    started = time.monotonic()
    with pytest.raises(nc.NvueError) as caught:
        switch.read_qos()
    took = time.monotonic() - started
    assert caught.value.kind == "deadline" and 3 <= took < 3.5, took
    message = str(caught.value)
    assert "switch leaf01" in message and "GET /nvue_v1/qos?rev=operational" in message
    assert "within 3s" in message and switch.requests == 1  # a deadline is not tried again


def test_an_answer_over_the_size_limit_is_refused_naming_the_limit(leaf: Leaf) -> None:
    with pytest.raises(nc.NvueError) as caught:
        client(leaf, max_body=1000).read_interfaces()
    message = str(caught.value)
    assert caught.value.kind == "too_large" and "switch leaf01" in message
    assert "GET /nvue_v1/interface?rev=operational" in message and "more than 1000 bytes" in message


class Interrupting:
    """open_url, raising KeyboardInterrupt (what a signal handler raises) before the ``nth`` request
    whose method and path match."""

    def __init__(self, method: str, fragment: str, nth: int = 1) -> None:
        self.method, self.fragment, self.left = method, fragment, nth

    def __call__(self, url: str, **kwargs: Any) -> Any:
        if kwargs.get("method") == self.method and self.fragment in url:
            self.left -= 1
            if self.left == 0:
                raise KeyboardInterrupt("SIGTERM")
        return open_url(url, **kwargs)


def test_an_interrupt_before_the_apply_deletes_the_revision_and_names_it(leaf: Leaf) -> None:
    with nvue_state.locked(leaf.state) as current:
        current["applied"]["interface"]["swp1"]["link"]["mtu"] = 1500
    switch = client(leaf, Interrupting("PATCH", "/revision/"))
    with pytest.raises(nc.NvueError) as caught:
        switch.apply({"interface/swp1/link": {"mtu": 9216}})
    rev = caught.value.revision
    assert caught.value.kind == "interrupted" and caught.value.revision_state == "deleted"
    assert f"SIGTERM while changing it; revision {rev} (pending) was deleted" in str(caught.value)
    assert left_behind(leaf) == [] and applied_mtu(leaf) == 1500


@pytest.mark.parametrize(("delay", "state"), [(0.3, "applied"), (3600.0, "apply")])
def test_an_interrupt_during_the_apply_waits_for_it_then_names_its_state(
    leaf: Leaf, monkeypatch: pytest.MonkeyPatch, delay: float, state: str
) -> None:
    monkeypatch.setattr(nc, "INTERRUPT_WAIT_S", 1.0)
    with nvue_state.locked(leaf.state) as current:
        current["applied"]["interface"]["swp1"]["link"]["mtu"] = 1500
        current["apply-delay-s"] = delay
    switch = client(leaf, Interrupting("GET", "/revision/"), sleep=time.sleep)
    started = time.monotonic()
    with pytest.raises(nc.NvueError) as caught:
        switch.apply({"interface/swp1/link": {"mtu": 9216}}, poll=0.1)
    assert time.monotonic() - started < 2.5  # bounded by INTERRUPT_WAIT_S and one request
    assert caught.value.kind == "interrupted" and caught.value.revision_state == state
    if state == "applied":
        assert "was applied before it ended" in str(caught.value) and applied_mtu(leaf) == 9216
    else:
        # its state read as apply within the 1 s wait; on a loaded machine the read after it may be given
        # up inside that second, and the message then says so instead of "after 1s"
        left = f"revision {caught.value.revision} is left apply on the switch"
        assert f"{left} after 1s" in str(caught.value) or (
            f"{left} (" in str(caught.value) and "not read" in str(caught.value)
        ), str(caught.value)
        assert applied_mtu(leaf) == 1500


# -- failing closed --------------------------------------------------------------------------
def test_a_wrong_ca_fails_closed_naming_the_ca_file(leaf: Leaf, tmp_path: Path) -> None:
    other = tmp_path / "other"
    nvue.prepare(other, "elsewhere", "127.0.0.1", ports=1)  # a CA that did not sign this switch
    counting = Counting()
    switch = client(leaf, counting, ca_path=str(other / "ca.pem"), retries=3)
    with pytest.raises(nc.NvueError) as caught:
        switch.read_roce()
    assert caught.value.kind == "tls"
    assert f"CA file {other / 'ca.pem'}" in str(caught.value) and "leaf01" in str(caught.value)
    assert len(counting.calls) == 1  # a TLS failure is not retried


def test_the_system_cas_do_not_trust_the_switch(leaf: Leaf) -> None:
    with pytest.raises(nc.NvueError) as caught:
        client(leaf, ca_path=None).read_roce()
    assert caught.value.kind == "tls" and "system CA certificates" in str(caught.value)


@pytest.mark.parametrize("problem", ["missing", "directory", "not-pem"])
def test_an_unusable_ca_file_is_a_local_error_before_any_request(
    leaf: Leaf, tmp_path: Path, problem: str
) -> None:
    path = {"missing": tmp_path / "nope.pem", "directory": tmp_path, "not-pem": tmp_path / "junk.pem"}[
        problem
    ]
    if problem == "not-pem":
        path.write_text("not a certificate\n", encoding="utf-8")
    counting = Counting()
    with pytest.raises(nc.NvueError) as caught:
        client(leaf, counting, ca_path=str(path))
    assert caught.value.kind == "config" and f"CA file {path}" in str(caught.value)
    assert counting.calls == []


def test_bad_credentials_fail_without_the_password(leaf: Leaf) -> None:
    wrong = leaf.password[::-1] + "-Wrong"
    switch = nc.NvueClient(
        leaf.address, "cumulus", wrong, name="leaf01", ca_path=str(leaf.ca), sleep=lambda s: None
    )
    with pytest.raises(nc.NvueError) as caught:
        switch.read_roce()
    assert caught.value.kind == "auth" and caught.value.status == 401
    message = str(caught.value)
    assert "leaf01" in message and "credentials" in message
    assert wrong not in message and wrong not in repr(caught.value) and leaf.password not in message


def test_a_password_a_switch_echoes_is_masked() -> None:
    def opener(url: str, **kwargs: Any) -> Any:
        body = json.dumps({"detail": "user cumulus with password s3cret-Echo failed"}).encode()
        raise HTTPError(url, 400, "Bad Request", None, io.BytesIO(body))  # type: ignore[arg-type]

    switch = nc.NvueClient("leaf01", "cumulus", "s3cret-Echo", opener=opener)
    with pytest.raises(nc.NvueError) as caught:
        switch.read_qos()
    assert "s3cret-Echo" not in str(caught.value) and "********" in str(caught.value)


def test_plain_http_is_refused_unless_a_reason_is_given() -> None:
    with pytest.raises(nc.NvueError) as caught:
        nc.NvueClient("http://127.0.0.1:8765", "cumulus", "pw", name="leaf01")
    assert caught.value.kind == "config"
    # the inventory variables the operator sets, not only the module's options
    assert "plain HTTP" in str(caught.value) and "set gpufleet_switch_address" in str(caught.value)
    assert "set gpufleet_switch_insecure_http_reason" in str(caught.value)
    allowed = nc.NvueClient(
        "http://127.0.0.1:8765", "cumulus", "pw", insecure_http_reason="lab switch, no TLS"
    )
    assert allowed.transport_hint is not None and "lab switch, no TLS" in allowed.transport_hint


def test_an_unreachable_switch_is_retried_then_named(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    slept: list[float] = []
    switch = nc.NvueClient(f"127.0.0.1:{port}", "cumulus", "pw", name="leaf01", retries=2, sleep=slept.append)
    with pytest.raises(nc.NvueError) as caught:
        switch.read_roce()
    assert caught.value.kind == "connection" and "connection refused" in str(caught.value)
    assert slept == [1.0, 2.0] and switch.requests == 3


# -- pure helpers ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("leaf01", "https://leaf01:8765"),
        ("10.0.0.5", "https://10.0.0.5:8765"),
        ("10.0.0.5:8443", "https://10.0.0.5:8443"),
        ("https://leaf01/", "https://leaf01:8765"),
        ("http://leaf01:80", "http://leaf01:80"),
        ("[fd00::5]", "https://[fd00::5]:8765"),
    ],
)
def test_normalize_address(given: str, expected: str) -> None:
    assert nc.normalize_address(given) == expected


@pytest.mark.parametrize(
    "given", ["", "ftp://leaf01", "https://u:p@leaf01", "https://leaf01/nvue_v1", "leaf01:x"]
)
def test_normalize_address_refuses(given: str) -> None:
    with pytest.raises(nc.NvueError) as caught:
        nc.normalize_address(given)
    assert caught.value.kind == "usage"


def test_api_path_quotes_segments_and_refuses_traversal() -> None:
    assert nc.api_path("qos/roce") == "/nvue_v1/qos/roce"
    assert nc.api_path("/nvue_v1/interface/swp1/") == "/nvue_v1/interface/swp1"
    assert nc.api_path("revision/changeset/a") == "/nvue_v1/revision/changeset/a"
    assert nc.api_path(["revision", "changeset/cumulus/x"]) == "/nvue_v1/revision/changeset%2Fcumulus%2Fx"
    with pytest.raises(nc.NvueError):
        nc.api_path("qos/../system")


@pytest.mark.parametrize(
    ("applied", "payload", "expected"),
    [
        ({"rx": "enable"}, {"rx": "enable"}, []),
        ({"rx": "disable"}, {"rx": "enable"}, [("qos/pfc/default-global/rx", "disable", "enable")]),
        (None, {"rx": "enable"}, [("qos/pfc/default-global/rx", None, "enable")]),
        ({"switch-priority": {"3": {}}}, {"switch-priority": {"3": {}}}, []),
        (
            {"switch-priority": {}},
            {"switch-priority": {"3": {}}},
            [("qos/pfc/default-global/switch-priority/3", None, "present")],
        ),
        ({"cable-length": 100}, {"cable-length": 100.0}, []),
    ],
)
def test_diff_patch(applied: Any, payload: Any, expected: list[tuple[str, Any, Any]]) -> None:
    changes = nc.diff_patch(applied, "qos/pfc/default-global", payload)
    assert [(c["setting"], c["from"], c["to"]) for c in changes] == expected
