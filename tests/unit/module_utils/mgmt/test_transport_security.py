"""What every management client (Redfish for BMCs, NVUE for switches) sends and how it tells a failure
below HTTP (module_utils/mgmt/transport_security.py)."""

from __future__ import annotations

import json
import ssl
from urllib.error import URLError

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import transport_security as ts


def test_request_options_never_use_netrc_and_send_json() -> None:
    options = ts.request_options(
        "PATCH", {"Accept": "application/json"}, {"a": 1}, 7, True, "/ca", False, "none"
    )
    assert options["use_netrc"] is False and options["follow_redirects"] == "none"
    assert json.loads(options["data"]) == {"a": 1}
    assert options["headers"] == {"Accept": "application/json", "Content-Type": "application/json"}
    bare = ts.request_options("GET", {"Accept": "x"}, None, 7, True, None, False, "safe")
    assert "data" not in bare and bare["headers"] == {"Accept": "x"}


def _untrusted() -> ssl.SSLCertVerificationError:
    err = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    err.verify_message = "self-signed certificate"
    return err


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (URLError(_untrusted()), ("untrusted", "self-signed certificate")),
        (URLError(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")), ("tls", None)),
        (URLError(TimeoutError("timed out")), ("connection", "timed out after 5s")),
        (URLError(ConnectionRefusedError(111, "Connection refused")), ("connection", "connection refused")),
        (URLError(OSError(113, "No route to host")), ("connection", "no route to host")),
    ],
)
def test_transport_failures_are_told_apart(exc: Exception, expected: tuple[str, str | None]) -> None:
    kind, detail = ts.transport_failure(exc, 5)
    assert kind == expected[0]
    assert detail == expected[1] if expected[1] else "wrong_version_number" in detail
