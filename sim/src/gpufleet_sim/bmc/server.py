"""A node's BMC process: HTTPS Redfish on the node's address, basic and session auth.

The listener follows the node state's `bmc.state`: "down" closes it (clients get connection
refused) and drops every session, as a BMC that hangs or resets does; "up" opens it again.
Credentials are checked against the state's salted hash on every request, so a password change
(the `bmc-bad-credentials` fault) takes effect at once. A POST of the host's ComputerSystem.Reset
(reset.check) leaves the reset for the node's Fleet (node_power.request) and answers 204 at once, as
bmcweb does; the host's PowerState then follows the Fleet. Privileges are not checked: the BMC's one
account is an Administrator (accounts.py).

Run: python -m gpufleet_sim.bmc.server --node-dir D --address A --port 443 --cert C --key K
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet_sim import https_service, node_power
from gpufleet_sim import state as sim_state
from gpufleet_sim.bmc import errors, odata, passwords, query, reset, resources
from gpufleet_sim.https_service import context_for

SESSIONS_PATH = f"{resources.ROOT}/SessionService/Sessions"
# DSP0266 lets a client create a session by POST to the collection or to its Members property.
LOGIN_PATHS = (SESSIONS_PATH, f"{SESSIONS_PATH}/Members")
# Unauthenticated, as DSP0266 requires: the version document, the service root and the OData documents.
PUBLIC = ("/redfish", resources.ROOT, odata.SERVICE_DOCUMENT, odata.METADATA)
# Real BMCs cap concurrent sessions (bmcweb 64, iDRAC 8); past it, a login is refused with 503.
MAX_SESSIONS = 16


def new_token() -> str:
    """A session's X-Auth-Token: 128 random bits in hex, as DMTF's Protocol Validator tests a token's
    randomness only when it is hexadecimal."""
    return secrets.token_hex(16)


MAX_BODY = 64 * 1024
WATCH_S = 0.1


@dataclass
class Session:
    ident: str
    user: str
    last_used: float


class SessionLimitError(Exception):
    """Every session slot is taken."""


class Bmc:
    """The service behind the listener: state, sessions, and whether it answers at all."""

    def __init__(self, node_dir: Path) -> None:
        self.node_dir = node_dir
        self.sessions: dict[str, Session] = {}  # token -> session
        self.lock = threading.Lock()
        self._cache: tuple[int, sim_state.State] | None = None

    def state(self) -> sim_state.State:
        stamp = (self.node_dir / sim_state.STATE_FILE).stat().st_mtime_ns
        with self.lock:
            if self._cache is None or self._cache[0] != stamp:
                self._cache = (stamp, sim_state.load(self.node_dir))
            return self._cache[1]

    def is_up(self) -> bool:
        return str(self.state().get("bmc", {}).get("state", "up")) == "up"

    def drop_sessions(self) -> None:
        with self.lock:
            self.sessions.clear()

    def _expire(self) -> None:
        """Drops the sessions idle past SessionTimeout (the lock held): a real BMC expires them on
        its own, so they neither stay listed nor count against MAX_SESSIONS."""
        now = time.monotonic()
        for token, current in list(self.sessions.items()):
            if now - current.last_used > resources.SESSION_TIMEOUT_S:
                del self.sessions[token]

    def session_for(self, token: str) -> Session | None:
        with self.lock:
            self._expire()
            current = self.sessions.get(token)
            if current is None:
                return None
            current.last_used = time.monotonic()
            return current

    def login(self, user: str, password: str) -> tuple[str, Session] | None:
        """(token, session), or None for bad credentials; SessionLimitError past MAX_SESSIONS."""
        if not passwords.verify(self.state().get("bmc", {}), user, password):
            return None
        with self.lock:
            self._expire()
            if len(self.sessions) >= MAX_SESSIONS:
                raise SessionLimitError
            token = new_token()
            current = Session(secrets.token_hex(8).upper(), user, time.monotonic())
            self.sessions[token] = current
            return token, current

    def logout(self, ident: str) -> bool:
        with self.lock:
            for token, current in list(self.sessions.items()):
                if current.ident == ident:
                    del self.sessions[token]
                    return True
        return False

    def open_sessions(self) -> dict[str, str]:
        with self.lock:
            self._expire()
            return {s.ident: s.user for s in self.sessions.values()}


class Server(https_service.TlsServer):
    name = "bmc"

    def __init__(self, address: tuple[str, int], bmc: Bmc, context: ssl.SSLContext) -> None:
        self.bmc = bmc
        super().__init__(address, Handler, context)


class Handler(https_service.Handler):
    server: Server
    raw_body = b""

    def version_string(self) -> str:
        return "Redfish-Service"

    # -- responses ------------------------------------------------------------------------
    def _send(self, code: int, payload: dict[str, Any] | None, headers: dict[str, str] | None = None) -> None:
        if payload is None:
            self._send_bytes(code, b"", None, headers)
        else:
            data = json.dumps(payload, indent=1).encode()
            self._send_bytes(code, data, "application/json;charset=utf-8", headers)

    def _send_bytes(
        self, code: int, data: bytes, content_type: str | None, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("OData-Version", odata.ODATA_VERSION)
        self.send_header("Cache-Control", "no-cache")
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, code: int, message_id: str, *args: str, headers: dict[str, str] | None = None) -> None:
        self._send(code, errors.body(message_id, *args), headers)

    def _unauthorized(self, message_id: str, *args: str) -> None:
        self._error(401, message_id, *args, headers={"WWW-Authenticate": 'Basic realm="Redfish"'})

    # -- auth -----------------------------------------------------------------------------
    def _authorised(self, path: str) -> bool:
        bmc = self.server.bmc
        token = self.headers.get("X-Auth-Token")
        if token:
            if bmc.session_for(token) is not None:
                return True
            self._unauthorized("NoValidSession")
            return False
        credentials = https_service.basic_credentials(self.headers.get("Authorization"))
        if credentials is None:
            self._unauthorized("NoValidSession")
            return False
        user, password = credentials
        if passwords.verify(bmc.state().get("bmc", {}), user, password):
            return True
        self._unauthorized("ResourceAtUriUnauthorized", path, "Unauthorized")
        return False

    def _body(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.raw_body or b"null")
        except (ValueError, UnicodeDecodeError):
            return None
        return data if isinstance(data, dict) else None

    # -- methods --------------------------------------------------------------------------
    def _dispatch(self) -> None:
        bmc = self.server.bmc
        self.raw_body = https_service.read_body(self, MAX_BODY)
        if not bmc.is_up():
            # a hung BMC answers nothing, even on a connection opened before it went down
            self.close_connection = True
            return
        path = resources.normalise(self.path)
        requested = self.headers.get("OData-Version")
        if odata.unsupported_version(requested):
            self._error(412, "HeaderInvalid", f"OData-Version: {requested}")
            return
        if self.command == "POST" and path in LOGIN_PATHS:
            self._login()
            return
        if path == "/redfish" and self.command in ("GET", "HEAD"):
            self._send(200, {"v1": f"{resources.ROOT}/"})
            return
        if path not in PUBLIC and not self._authorised(path):
            return
        refused = query.unsupported(self.path)
        if refused is not None:
            # DSP0266: 501 for a query parameter the service does not support (it supports none)
            self._error(501, "QueryParameterUnsupported", refused)
            return
        view = resources.View.of(bmc.state(), time.time(), bmc.open_sessions())
        if path == odata.METADATA and self.command in ("GET", "HEAD"):
            self._send_bytes(200, odata.metadata(), "application/xml;charset=utf-8", {"Allow": "GET, HEAD"})
            return
        if path == odata.SERVICE_DOCUMENT and self.command in ("GET", "HEAD"):
            self._send(200, odata.service_document(resources.service_root(view)), {"Allow": "GET, HEAD"})
            return
        if path == resources.RESET_TARGET:
            if self.command == "POST":
                self._reset()
            else:
                self._error(405, "OperationNotAllowed", headers={"Allow": "POST"})
            return
        found = resources.get(path, view)
        if found is None:
            self._error(404, "ResourceMissingAtURI", path)
        elif self.command in ("GET", "HEAD"):
            self._send(200, found, self._resource_headers(path, found))
        elif self.command == "DELETE" and path.startswith(SESSIONS_PATH + "/"):
            bmc.logout(path.rsplit("/", 1)[1])
            self._send(204, None)
        else:
            self._error(405, "OperationNotAllowed", headers={"Allow": self._allow(path)})

    def _resource_headers(self, path: str, found: dict[str, Any]) -> dict[str, str]:
        headers = {"Allow": self._allow(path), "ETag": odata.etag(found)}
        schema = odata.described_by(found)
        if schema is not None:
            headers["Link"] = schema
        return headers

    @staticmethod
    def _allow(path: str) -> str:
        if path == SESSIONS_PATH:
            return "GET, HEAD, POST"
        return "GET, HEAD, DELETE" if path.startswith(SESSIONS_PATH + "/") else "GET, HEAD"

    def _reset(self) -> None:
        checked = reset.check(self.raw_body)
        if isinstance(checked, reset.Refusal):
            self._send(400, errors.body(checked.message_id, *checked.args, note=checked.note))
            return
        node_power.request(self.server.bmc.node_dir, checked)
        self._send(204, None)

    def _login(self) -> None:
        body = self._body()
        if body is None:
            self._error(400, "MalformedJSON")
            return
        for key in ("UserName", "Password"):
            if not isinstance(body.get(key), str):
                self._error(400, "PropertyMissing", key)
                return
        try:
            result = self.server.bmc.login(body["UserName"], body["Password"])
        except SessionLimitError:
            self._error(503, "SessionLimitExceeded", headers={"Retry-After": "30"})
            return
        if result is None:
            self._unauthorized("ResourceAtUriUnauthorized", SESSIONS_PATH, "Unauthorized")
        else:
            token, current = result
            location = f"{SESSIONS_PATH}/{current.ident}"  # the session's URI, whichever path created it
            self._send(
                201,
                resources.session(current.ident, current.user),
                {"X-Auth-Token": token, "Location": location},
            )

    do_GET = do_HEAD = do_POST = do_DELETE = do_PATCH = do_PUT = _dispatch


class Listener:
    """Opens and closes the HTTPS listener as the node state's bmc.state says."""

    def __init__(self, bmc: Bmc, address: tuple[str, int], context: ssl.SSLContext) -> None:
        self.bmc, self.address, self.context = bmc, address, context
        self.server: Server | None = None
        self.thread: threading.Thread | None = None

    def open(self) -> None:
        self.server = Server(self.address, self.bmc, self.context)
        self.thread = https_service.serve_in_thread(self.server)

    def close(self) -> None:
        if self.server is not None and self.thread is not None:
            https_service.stop_serving(self.server, self.thread)
        self.server = self.thread = None
        self.bmc.drop_sessions()

    def follow(self) -> None:
        up = self.bmc.is_up()
        if up and self.server is None:
            self.open()
        elif not up and self.server is not None:
            self.close()


@contextlib.contextmanager
def in_process(node_dir: Path, bmc_dir: Path, name: str, address: str = "127.0.0.1") -> Iterator[Listener]:
    """The node's BMC (laid out by launch.prepare in ``bmc_dir``) served from threads of this process
    on a free port of ``address``, for tests; closed on the way out. ``listener.server.server_address``
    says where."""
    context = context_for(bmc_dir / f"{name}.pem", bmc_dir / f"{name}-key.pem")
    listener = Listener(Bmc(node_dir), (address, 0), context)
    listener.follow()
    try:
        yield listener
    finally:
        listener.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpufleet-sim-bmc")
    parser.add_argument("--node-dir", type=Path, required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--port", type=int, default=443)
    parser.add_argument("--cert", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    args = parser.parse_args(argv)
    stopping = https_service.stop_on_signals()
    listener = Listener(Bmc(args.node_dir), (args.address, args.port), context_for(args.cert, args.key))
    print(f"bmc: pid {os.getpid()} on https://{args.address}:{args.port}", file=sys.stderr, flush=True)
    try:
        listener.follow()
        while not stopping.wait(WATCH_S):
            listener.follow()
    finally:
        listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
