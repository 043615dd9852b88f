"""A simulated NVIDIA Cumulus Linux leaf switch: the NVUE REST subset gpufleet uses, over HTTPS.

Served (paths follow ``nv show``, as NVIDIA's NVUE API page says; shapes and their sources are in
``nvue_state``'s docstring):

- ``GET /nvue_v1/<path>?rev=applied|startup|operational|<revision id>`` (default operational), with
  ``filled=false`` leaving out the values NVUE fills in (not for operational): any node of the tree
  (the objects of nvue_model [OBJECTS], e.g. ``/nvue_v1/service/ntp`` once set), e.g.
  ``/nvue_v1/qos/roce``, ``/nvue_v1/qos/pfc``, ``/nvue_v1/interface/swp1``,
  ``/nvue_v1/interface/swp1/link/mtu``, ``/nvue_v1/interface/swp1/qos/roce/status``; ``/nvue_v1/``
  is the whole tree with its ``header``. A missing node, or a path outside NVUE's objects, is 404.
- ``GET /nvue_v1/revision`` (every revision, keyed by id) and ``GET /nvue_v1/revision/<id>``
  (``{"state", "transition": {"issue", "progress"}}``); the id is URL-encoded in the path
  (``changeset%2Fcumulus%2F...``) as NVIDIA's examples send it.
- ``POST /nvue_v1/revision``: a new pending revision, answered 200 with ``{<id>: {state, transition}}``.
- ``PATCH /nvue_v1/<path>?rev=<id>`` (``<path>`` may be the root): the body merged at ``<path>`` into
  the pending revision, ``null`` unsetting a key; answers the change as 5.10+ does, the body plus what
  NVUE added (``type: swp``). A value NVUE's schema refuses is 400; a path outside its objects 404.
- ``PATCH /nvue_v1/revision/<id>`` with ``{"state": "apply"}``: answers ``{"state": "apply", ...}``;
  the revision reads "applied" once the state file's ``apply-delay-s`` has passed (0 by default), and
  only then is it the applied configuration (and, with auto-save on, the startup one). A change NVUE
  asks "are you sure" about ends in "ays_fail" unless the body has ``"auto-prompt": {"ays":
  "ays_yes"}`` (which changes: nvue_model's docstring).
- ``PATCH /nvue_v1/revision/applied`` with ``{"state": "save", ...}``: the applied configuration
  becomes the startup one; answers ``{"state": "save", ...}``.
- ``DELETE /nvue_v1/revision/<id>``: a revision that is not applied and not applying is removed
  (``nv config detach`` for a pending one); an applied or applying one is 400. Assumed: NVUE's
  OpenAPI lists DELETE on a revision; no public capture of its answer was found (the sim answers
  an empty object).

A leaf can also misbehave as a service (sim/faults_switch.py's ``switch-patch-400``, ``-patch-500``,
``-apply-500``, ``-slow-patch``, ``-trickle``: the state file's ``misbehave``): see ``_misbehaving``.

HTTP basic auth on every request (NVUE's nginx front end; the account's salted hash is in the state
file and checked on each request, so a password change takes effect at once). Errors are
``application/problem+json`` bodies ``{"type": "about:blank", "status", "title", "detail"}``
(assumed: nvued is an OpenAPI service answering RFC 7807 problems as connexion does; no real error
body was found public). Not modelled: DELETE on a configuration path, ``?rev=pending``, ``?diff=``,
``?view=``. Passwords are never logged: the access
log prints method, path and status only.

Run: ``python -m gpufleet_sim.nvue --state S --address 127.0.0.2 --port 8765 --cert C --key K``;
``prepare()`` writes a new switch's state file, certificate and key (signed by a CA made once per
directory) and returns its password.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from gpufleet_sim import https_service, nvue_model, nvue_state
from gpufleet_sim.bmc import passwords, tls
from gpufleet_sim.https_service import context_for

# NVUE's REST port on Cumulus Linux (NVUE API page: "the default port 8765").
PORT = 8765
PREFIX = "/" + nvue_state.NVUE_API_VERSION
REVISION = PREFIX + "/revision"
MAX_BODY = 1024 * 1024
# The answer to a URL no route matches (connexion's, assumed for nvued: see the docstring).
NOT_FOUND = (
    "The requested URL was not found on the server. If you entered the URL manually please check your "
    "spelling and try again."
)


class Switch:
    """The service behind the listener: the state file, read again whenever it changes."""

    def __init__(self, state_path: Path) -> None:
        self.state_path = state_path
        self.lock = threading.Lock()
        self._cache: tuple[int, nvue_state.State] | None = None

    def read(self) -> nvue_state.State:
        """The current state, first finishing any apply whose time has come."""
        stamp = self.state_path.stat().st_mtime_ns
        with self.lock:
            if self._cache is None or self._cache[0] != stamp:
                self._cache = (stamp, nvue_state.load(self.state_path))
            current = self._cache[1]
            pending = any(r.get("state") == "apply" for r in current.get("revisions", {}).values())
        if pending:
            with nvue_state.locked(self.state_path) as fresh:
                nvue_state.settle(fresh, time.time())
            return self.read_fresh()
        return current

    def read_fresh(self) -> nvue_state.State:
        with self.lock:
            self._cache = None
        stamp = self.state_path.stat().st_mtime_ns
        data = nvue_state.load(self.state_path)
        with self.lock:
            self._cache = (stamp, data)
        return data

    def authorised(self, user: str, password: str) -> bool:
        return passwords.verify(self.read().get("api", {}), user, password)


class Server(https_service.TlsServer):
    name = "nvue"

    def __init__(self, address: tuple[str, int], switch: Switch, context: ssl.SSLContext) -> None:
        self.switch = switch
        super().__init__(address, Handler, context)


class Handler(https_service.Handler):
    server: Server
    user = ""

    def version_string(self) -> str:
        return "nginx"

    def log_message(self, format: str, *args: Any) -> None:
        # Only the request line's method and path reach the log, never a header (Authorization).
        return

    # -- responses ------------------------------------------------------------------------
    def _send(self, code: int, payload: Any, content_type: str = "application/json") -> None:
        data = json.dumps(payload, indent=2).encode() if payload is not None else b""
        trickle = self._misbehaving("trickle")
        if trickle is not None:
            self._trickle(code, content_type, data, float(trickle))
            return
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        # [API] responses carry it (the workshop README's response headers).
        self.send_header("Strict-Transport-Security", "max-age=31536000; includeSubDomains")
        if code == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="NVUE"')
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _trickle(self, code: int, content_type: str, data: bytes, interval: float) -> None:
        """The whole answer (status line, headers, body), one byte every ``interval`` seconds: a
        per-read socket timeout never fires, only a deadline on the whole request ends it."""
        head = (
            f"HTTP/1.1 {code} {self.responses.get(code, ('',))[0]}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode()
        self.close_connection = True
        for byte in head + data:
            self.wfile.write(bytes((byte,)))
            time.sleep(interval)

    def _misbehaving(self, how: str) -> Any:
        """The ``misbehave`` entry ``how`` of the state file (faults_switch.py's service faults), or None."""
        return (self.server.switch.read().get("misbehave") or {}).get(how)

    def _problem(self, code: int, title: str, detail: str) -> None:
        problem = {"type": "about:blank", "status": code, "title": title, "detail": detail}
        self._send(code, problem, "application/problem+json")

    def _unknown_url(self) -> None:
        self._problem(404, "Not Found", NOT_FOUND)

    # -- auth -----------------------------------------------------------------------------
    def _authorised(self) -> bool:
        user, password = https_service.basic_credentials(self.headers.get("Authorization")) or ("", "")
        if user and self.server.switch.authorised(user, password):
            self.user = user
            return True
        self._problem(401, "Unauthorized", "The request requires valid user credentials.")
        return False

    def _body(self) -> tuple[bool, Any]:
        raw = https_service.read_body(self, MAX_BODY)
        if not raw:
            return True, None
        try:
            return True, json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return False, None

    # -- methods --------------------------------------------------------------------------
    def _dispatch(self) -> None:
        ok, body = self._body()
        if not self._authorised():
            return
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        path = parts.path.rstrip("/") or "/"
        if not ok:
            self._problem(400, "Bad Request", "The request body is not JSON.")
            return
        if path == PREFIX or path.startswith(PREFIX + "/"):
            rest = path[len(PREFIX) :].strip("/")
        else:
            self._unknown_url()
            return
        if rest == "revision" or rest.startswith("revision/"):
            self._revision(unquote(rest[len("revision") :].lstrip("/")), body)
        elif self.command in ("GET", "HEAD"):
            self._get(rest, query.get("rev", "operational"), query.get("filled", "true") != "false")
        elif self.command == "PATCH":
            self._patch(rest, query.get("rev"), body)
        else:
            self._problem(405, "Method Not Allowed", "The method is not allowed for the requested URL.")

    def _get(self, rest: str, rev: str, filled: bool) -> None:
        parts = [unquote(p) for p in rest.split("/") if p]
        if parts and parts[0] not in (*nvue_model.BRANCHES, "header"):
            self._unknown_url()
            return
        tree = nvue_state.view(self.server.switch.read(), rev, filled)
        if tree is None:
            self._problem(404, "Not Found", f"Revision {rev} does not exist.")
            return
        try:
            self._send(200, nvue_state.walk(tree, parts))
        except KeyError:
            self._problem(404, "Not Found", f"/{'/'.join(parts)} does not exist in revision {rev}.")

    def _patch(self, rest: str, rev: str | None, body: Any) -> None:
        if not rev or rev in ("applied", "operational"):
            self._problem(
                400, "Bad Request", "PATCH needs ?rev=<id> of a pending revision (POST /nvue_v1/revision)."
            )
            return
        parts = [unquote(p) for p in rest.split("/") if p]
        try:
            nvue_state.check_path(parts)
        except nvue_state.UnknownPath:
            self._unknown_url()
            return
        if self._misbehaving("patch-400") is not None:
            self._problem(400, "Bad Request", f"/{'/'.join(parts)}: the platform does not support this")
            return
        if self._misbehaving("patch-500") is not None:
            self._problem(500, "Internal Server Error", "nvued: unexpected error")
            return
        answer: list[Any] = []  # the change as NVUE answers it, set inside the state's lock
        if not self._change(
            rev, lambda current: answer.append(nvue_state.patch_revision(current, rev, parts, body))
        ):
            return
        slow = self._misbehaving("slow-patch")
        if slow is not None:  # merged, then answered too slowly for the client to wait for
            data = json.dumps(answer[0]).encode()
            self._trickle(200, "application/json", data, float(slow))
            return
        self._send(200, answer[0])

    def _revision(self, rev: str, body: Any) -> None:
        switch = self.server.switch
        if not rev:
            if self.command == "POST":
                with nvue_state.locked(switch.state_path) as current:
                    new = nvue_state.create_revision(current, self.user)
                    answer = {new: nvue_state.revision_body(current["revisions"][new])}
                self._send(200, answer)
            elif self.command in ("GET", "HEAD"):
                revisions = switch.read().get("revisions", {})
                self._send(200, {r: nvue_state.revision_body(v) for r, v in revisions.items()})
            else:
                self._problem(405, "Method Not Allowed", "The method is not allowed for the requested URL.")
            return
        if self.command in ("GET", "HEAD"):
            revision = switch.read().get("revisions", {}).get(rev)
            if revision is None:
                self._problem(404, "Not Found", f"Revision {rev} does not exist.")
            else:
                self._send(200, nvue_state.revision_body(revision))
            return
        if self.command == "DELETE":
            self._delete_revision(rev)
            return
        if self.command != "PATCH":
            self._problem(405, "Method Not Allowed", "The method is not allowed for the requested URL.")
            return
        if self._misbehaving("apply-500") is not None:
            self._problem(500, "Internal Server Error", "nvued: unexpected error")
            return
        wanted = body.get("state") if isinstance(body, dict) else None
        if wanted == "save":
            self._save(rev)
            return
        if wanted != "apply":
            self._problem(
                400, "Bad Request", 'Only {"state": "apply" | "save", ...} is supported on a revision.'
            )
            return
        if not self._change(rev, lambda current: nvue_state.request_apply(current, rev, body, time.time())):
            return
        # [API]: the apply request answers "apply"; GET on the revision says when it is applied.
        self._send(200, {"state": "apply", "transition": {"issue": {}, "progress": ""}})

    def _save(self, rev: str) -> None:
        """``nv config save`` through the API (nvue_state [SAVE]): on "applied" (the guide's form) or the
        applied revision's id; another revision is 400, one that does not exist 404."""
        try:
            with nvue_state.locked(self.server.switch.state_path) as current:
                if rev != "applied" and rev not in current.get("revisions", {}):
                    raise KeyError(rev)
                nvue_state.request_save(current, rev)
        except KeyError:
            self._problem(404, "Not Found", f"Revision {rev} does not exist.")
            return
        except nvue_state.PatchError as exc:
            self._problem(400, "Bad Request", str(exc))
            return
        self._send(200, {"state": "save", "transition": {"issue": {}, "progress": ""}})

    def _delete_revision(self, rev: str) -> None:
        if self._change(rev, lambda current: nvue_state.delete_revision(current, rev)):
            self._send(200, {})

    def _change(self, rev: str, change: Callable[[nvue_state.State], object]) -> bool:
        """``change`` on the state under its lock, for revision ``rev`` (which must exist); False,
        the problem answered, when the revision does not exist (404) or NVUE refuses it (400)."""
        try:
            with nvue_state.locked(self.server.switch.state_path) as current:
                if rev not in current.get("revisions", {}):
                    raise KeyError(rev)
                change(current)
        except KeyError:
            self._problem(404, "Not Found", f"Revision {rev} does not exist.")
            return False
        except nvue_state.PatchError as exc:
            self._problem(400, "Bad Request", str(exc))
            return False
        return True

    do_GET = do_HEAD = do_POST = do_PATCH = do_PUT = do_DELETE = _dispatch


class Listener:
    """The HTTPS listener in a thread: ``start()``, ``port``, ``stop()`` (tests and the CLI)."""

    def __init__(self, state_path: Path, address: tuple[str, int], context: ssl.SSLContext) -> None:
        self.server = Server(address, Switch(state_path), context)
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> Listener:
        self.thread = https_service.serve_in_thread(self.server)
        return self

    def stop(self) -> None:
        if self.thread is None:  # never started: only the socket to close
            self.server.server_close()
            return
        https_service.stop_serving(self.server, self.thread)


# ---------------------------------------------------------------- certificates and accounts


def issue_certificate(directory: Path, hostname: str, address: str) -> tuple[Path, Path]:
    """(certificate, key) for switch ``hostname`` at ``address``, signed by the directory's CA
    (``gpufleet_sim.bmc.tls``: the fleet's one CA), naming the address and the hostname."""
    return tls.issue(directory, hostname, address, dns_name=hostname)


def prepare(directory: Path, hostname: str, address: str, ports: int = 32) -> str:
    """A new switch under ``directory``: ``<hostname>.json`` state, certificate, key; returns its password.

    The password is returned once and never stored (the state keeps a salted hash).
    """
    directory.mkdir(parents=True, exist_ok=True)
    issue_certificate(directory, hostname, address)
    password = passwords.new_password()
    state = nvue_state.new_state(hostname, passwords.hashed(password), ports=ports, mgmt_ip=address)
    nvue_state.save(state_file(directory, hostname), state)
    return password


def state_file(directory: Path, hostname: str) -> Path:
    return directory / f"{hostname}.json"


USERNAME = nvue_state.USERNAME


def argv(directory: Path, hostname: str, address: str) -> list[str]:
    """The command line of a leaf prepared under ``directory`` (the Fleet runs one per leaf)."""
    return [
        sys.executable,
        "-m",
        "gpufleet_sim.nvue",
        "--state",
        str(state_file(directory, hostname)),
        "--address",
        address,
        "--cert",
        str(directory / f"{hostname}.pem"),
        "--key",
        str(directory / f"{hostname}-key.pem"),
    ]


def listening(address: str, port: int = PORT) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def _down(path: Path) -> bool:
    """The ``switch-down`` fault (sim/faults_switch.py): the switch answers nothing at all."""
    try:
        return bool(nvue_state.load(path).get("down"))
    except (OSError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpufleet-sim-nvue")
    parser.add_argument("--state", type=Path, required=True, help="the switch's JSON state file")
    parser.add_argument("--address", default="127.0.0.1", help="address to bind (a loopback 127.0.x.y)")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--cert", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    args = parser.parse_args(argv)
    stopping = https_service.stop_on_signals()
    context = context_for(args.cert, args.key)
    listener: Listener | None = None
    seen = -1
    try:
        # The state file is looked at a few times a second: a switch-down fault closes the listening
        # socket (clients see the connection refused, as of a switch that is off), its clear reopens it.
        while True:
            stamp = args.state.stat().st_mtime_ns
            if stamp != seen:
                seen = stamp
                down = _down(args.state)
                if down and listener is not None:
                    listener.stop()
                    listener = None
                    print(f"nvue: pid {os.getpid()} down (switch-down)", file=sys.stderr, flush=True)
                elif not down and listener is None:
                    listener = Listener(args.state, (args.address, args.port), context).start()
                    where = f"https://{args.address}:{listener.port}"
                    print(f"nvue: pid {os.getpid()} on {where}", file=sys.stderr, flush=True)
            if stopping.wait(0.25):
                break
    finally:
        if listener is not None:
            listener.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
