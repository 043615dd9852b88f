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
bodies), ``bounded_request`` (one request under a wall-clock deadline on all of it and a cap on the
answer's size) and ``transport_failure`` (untrusted certificate, TLS handshake, or no connection,
and why). Runs on the controller; stdlib only.
"""

from __future__ import annotations

import io
import json
import os
import socket
import ssl
import threading
from urllib.error import HTTPError
from urllib.parse import urlsplit

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import hint

# The most one answer may hold. A management API's largest document (a 64-port leaf's whole
# interface tree, operational state included) is well under this; more is a device gone wrong.
MAX_BODY = 8 * 1024 * 1024
# What an error answer's body is read for: its detail, a few hundred bytes.
_ERROR_BODY = 64 * 1024
_CHUNK = 64 * 1024


class TransportConfigError(ValueError):
    """A local configuration error of the transport (address scheme, CA file); never retried."""


class DeadlineExceeded(Exception):
    """The request (connect, send, the whole answer) did not end within ``deadline`` seconds."""

    def __init__(self, deadline):
        super().__init__("no complete answer within %ss" % seconds(deadline))
        self.deadline = deadline


class BodyTooLarge(Exception):
    """The answer's body is longer than ``limit`` bytes."""

    def __init__(self, limit):
        super().__init__("an answer longer than %s" % size(limit))
        self.limit = limit


class Answer:
    """A whole answer: ``status``, ``headers`` (names in lower case) and the ``body`` bytes."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body


def seconds(value):
    return "%g" % float(value)


def size(limit):
    if limit >= 1024 * 1024 and limit % (1024 * 1024) == 0:
        return "%d MiB" % (limit // (1024 * 1024))
    return "%d bytes" % limit


def read_capped(resp, limit):
    """Every byte of ``resp``'s body, raising BodyTooLarge past ``limit`` (never more is held)."""
    chunks, total = [], 0
    while True:
        chunk = resp.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)


def _error_with_body(exc, limit):
    """``exc`` (HTTPError) again, its body read now (the start of it only: it is read for a detail)."""
    try:
        body = read_capped(exc, min(limit, _ERROR_BODY))
    except BodyTooLarge:
        body = b""
    except (OSError, ValueError, AttributeError):
        body = b""
    finally:
        exc.close()
    return HTTPError(exc.url, exc.code, exc.msg, exc.hdrs, io.BytesIO(body))


def bounded_request(opener, url, options, deadline, limit=MAX_BODY):
    """One request, ``opener(url, **options)`` (open_url's signature), bounded in time and size.

    ``deadline`` (seconds) bounds all of it on the wall clock: connecting, sending, and reading
    the whole answer. A socket timeout bounds each read only, so a device that trickles a byte
    every few seconds would hold the caller for as long as it likes; here the request runs in a
    thread the caller stops waiting for at the deadline (that thread ends at its own socket
    timeout, or with the process). ``limit`` caps the body's bytes.

    Returns an Answer; raises DeadlineExceeded, BodyTooLarge, HTTPError (its body already read,
    at most 64 KiB) or what the opener raised.
    """
    outcome = {}

    def work():
        try:
            # each socket operation may take a little longer than the whole: the deadline, never a
            # socket timeout, is what ends a request that is too slow
            resp = opener(url, **dict(options, timeout=float(deadline) + 1.0))
            try:
                headers = getattr(resp, "headers", None) or {}
                outcome["answer"] = Answer(
                    getattr(resp, "status", 200),
                    {str(k).lower(): v for k, v in headers.items()},
                    read_capped(resp, limit),
                )
            finally:
                close = getattr(resp, "close", None)
                if close is not None:
                    close()
        except HTTPError as exc:
            outcome["error"] = _error_with_body(exc, limit)
        except BaseException as exc:  # handed to the caller's thread as it is
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="gpufleet-request", daemon=True)
    worker.start()
    worker.join(float(deadline))
    if worker.is_alive():
        raise DeadlineExceeded(deadline)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["answer"]


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
