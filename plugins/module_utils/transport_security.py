# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules for talking to a management device that gets credentials (a BMC, later a switch).

One place for two rules every such client follows before it sends anything:

- ``require_tls``: no ``http://`` address, since the password (or a session token) would cross the
  network in clear text, unless an explicit reason is given; the reason comes back as a hint the
  caller must report (results.hint), so the opt-in is on the record;
- ``check_ca_file``: a CA file that is named must exist, be readable and hold PEM certificates, so
  a local configuration error is said as such at once (not as an unreachable device after retries).

Both raise TransportConfigError naming the setting to fix. And what every such client sends and how
it tells a failure below HTTP: ``request_options`` (open_url's arguments: never ~/.netrc, JSON
bodies) and ``transport_failure`` (untrusted certificate, TLS handshake, or no connection, and why).
Runs on the controller; stdlib only.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
from urllib.parse import urlsplit

from ansible_collections.gpufleet.node.plugins.module_utils.results import hint


class TransportConfigError(ValueError):
    """A local configuration error of the transport (address scheme, CA file); never retried."""


def require_tls(address, device, setting, reason_setting, reason=None):
    """Refuse a plain-HTTP ``address`` of ``device`` unless ``reason`` says why it must be so.

    ``address`` is the normalised URL (a missing scheme already made https). ``setting`` names the
    address setting, ``reason_setting`` the opt-in. Returns None for https, the hint to report for
    http with a non-blank reason; raises TransportConfigError for http without one.
    """
    scheme = urlsplit(address).scheme.lower()
    if scheme != "http":
        return None
    why = " ".join(str(reason or "").split())
    if not why:
        raise TransportConfigError(
            "%s address %s is plain HTTP, so its password would cross the network in clear text; "
            "set %s to https://... or, where the %s cannot do TLS, set %s to why plain HTTP is "
            "acceptable (it is reported)" % (device, address, setting, device, reason_setting)
        )
    return hint(
        "%s %s is read over plain HTTP (its password crosses the network in clear text), allowed by "
        "%s: %s" % (device, address, reason_setting, why)
    )


def check_ca_file(path, device, setting):
    """Raise TransportConfigError unless ``path`` is a readable file of PEM CA certificates."""
    if os.path.isdir(path):
        problem = "is a directory, not a PEM file"
    elif not os.path.exists(path):
        problem = "does not exist on the controller"
    elif not os.access(path, os.R_OK):
        problem = "is not readable by the controller's user"
    else:
        problem = None
        try:
            ssl.create_default_context(cafile=path)
        except ssl.SSLError as exc:
            problem = "holds no PEM certificate OpenSSL can load (%s)" % (exc.reason or exc)
        except (OSError, ValueError) as exc:
            problem = "cannot be read (%s)" % (getattr(exc, "strerror", None) or exc)
    if problem:
        raise TransportConfigError(
            "CA file %s %s; set %s to the PEM file of the CA that signed the %s certificate"
            % (path, problem, setting, device)
        )


def request_options(method, headers, body, timeout, validate_certs, ca_path, use_proxy, follow_redirects):
    """open_url's keyword arguments for one request to a management API (a JSON ``body`` or None)."""
    headers = dict(headers)
    options = {
        "method": method,
        "timeout": timeout,
        "validate_certs": validate_certs,
        "ca_path": ca_path,
        "use_proxy": use_proxy,
        "follow_redirects": follow_redirects,
        # ~/.netrc on the controller must not slip other credentials to a device.
        "use_netrc": False,
    }
    if body is not None:
        headers["Content-Type"] = "application/json"
        options["data"] = json.dumps(body)
    options["headers"] = headers
    return options


def os_reason(exc):
    """What the OS (or the library) said went wrong, in lower case where it is an OS error."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    return str(reason) or type(reason).__name__


def transport_failure(exc, timeout):
    """How a request failed below HTTP: ``(kind, detail)``, kind one of "untrusted" (the device's
    certificate did not verify; detail the verifier's words), "tls" (the handshake failed) or
    "connection" (detail: timed out, refused, or the OS's reason). Only "connection" is worth
    another try."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(reason):
        return "untrusted", getattr(reason, "verify_message", None) or "certificate not trusted"
    if isinstance(reason, ssl.SSLError):
        return "tls", os_reason(exc)
    if isinstance(reason, (socket.timeout, TimeoutError)) or "timed out" in str(reason):
        return "connection", "timed out after %ss" % timeout
    if isinstance(reason, ConnectionRefusedError) or "refused" in str(reason).lower():
        return "connection", "connection refused"
    return "connection", os_reason(exc)
