# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVUE REST client for Cumulus Linux leaf switches: read the lossless-RoCE settings, apply a patch.

The switch side of the fabric checks. It talks to NVUE's REST API (HTTPS, default port 8765, HTTP
basic auth; URL paths follow ``nv show``: ``/nvue_v1/qos/roce``, ``/nvue_v1/interface/swp1``,
``?rev=applied|operational``) from the controller, as redfish_client reads a BMC:

- before anything is sent, ``transport_security``'s rules: no ``http://`` address without a stated
  reason (the reason comes back as ``transport_hint`` to report), and a named CA file must be a
  readable PEM file; both are local configuration errors (kind ``config``), never retried;
- TLS is verified against ``ca_path`` (or the controller's system CAs) unless ``validate_certs`` is
  false; a verification failure names the switch and the CA file and is never retried;
- every GET is cached per (path, revision) for the life of the client, and the readers fetch whole
  subtrees (``/qos``, ``/interface``), so a switch is read once per run whatever the number of host
  ports cabled to it; ``client_for`` hands the same client to every caller in a process;
- a change goes through a revision: ``POST /nvue_v1/revision``, ``PATCH <path>?rev=<id>`` per
  path, ``PATCH /nvue_v1/revision/<id>`` with ``{"state": "apply", "auto-prompt": {"ays":
  "ays_yes"}}``, then ``GET /nvue_v1/revision/<id>`` until it reads "applied" or a timeout; nothing
  is created when the applied configuration already has every value (idempotent);
- a revision gpufleet made and did not apply is not left behind: on every failure (a PATCH
  refused, a 500, a deadline, an interrupt) the revision is read and, unless it is applied or
  still applying, deleted (``DELETE /nvue_v1/revision/<id>``, as NVUE's ``nv config detach``);
  the error says what became of it, and ``revision``/``revision_state`` name it;
- every request has a deadline on all of it (``timeout`` seconds: connect, send, the whole
  answer, transport_security.bounded_request) and an answer is at most ``max_body`` bytes; a
  request past its deadline is not sent again (a switch that slow is not read this run);
- only GETs are retried (connection errors, HTTP 502/503/504); a write is sent once.

The transport (TLS rules, deadlines, retries, errors below HTTP) is https_transport.HttpsClient,
as the Redfish client's. The password is never part of a message (and is masked should a switch
echo it). Errors are NvueError with a ``kind``. Stdlib plus ansible.module_utils only.
"""

from __future__ import annotations

import copy
import json
import time
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import change
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.https_transport import (
    HttpsClient,
    split_address,
)
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.transport_security import seconds

# NVUE's REST port on Cumulus Linux 5.x ("If you do not set a port, Cumulus Linux uses the default
# port 8765", NVIDIA's NVUE API page).
DEFAULT_PORT = 8765
PREFIX = "/nvue_v1"
REVISION = PREFIX + "/revision"
# NVIDIA's examples confirm an apply with this answer to the "are you sure" prompt.
APPLY_BODY = {"state": "apply", "auto-prompt": {"ays": "ays_yes"}}
# Revision states that end an apply; "applied" is the good one (NVUE API page, nvidia.nvue).
FAILED_STATES = frozenset(("apply_fail", "ays_fail", "ignore_fail", "invalid", "apply_error"))
# The settings the messages name: the inventory variable the operator sets (roles/switch_qos/vars
# passes it to the module option named after it).
ADDRESS_SETTING = "gpufleet_switch_address (the module's address)"
HTTP_REASON_SETTING = "gpufleet_switch_insecure_http_reason (the module's insecure_http_reason)"
CA_SETTING = "gpufleet_switch_ca_path (the module's ca_path)"
# Revision states from which the revision changes nothing more on its own: kept (applied) or
# deleted (any other). "apply" is in progress and is waited for.
KEEP_STATES = frozenset(("applied",))
BUSY_STATES = frozenset(("apply",))
# How long an interrupted apply is given to end (gpufleet stops a canceled run's workers with
# SIGTERM and SIGKILLs them 5 s later: procs.stop_marked).
INTERRUPT_WAIT_S = 4.0
_MASK = "********"


class NvueError(Exception):
    """A request failed in a way the operator must fix; ``kind`` says which way.

    kind is one of: config (plain HTTP without a reason, an unusable CA file: found before any
    request, never retried), usage (no usable address or path), auth (HTTP 401/403), not_found
    (404), tls (certificate verification or handshake), connection (refused, timeout, unreachable,
    after retries), deadline (no whole answer within the request's deadline), too_large (an
    answer over the size limit), http (other statuses), refused (HTTP 400: NVUE refused a value),
    protocol (not JSON, not the NVUE shape), apply (the revision ended in a failed state), timeout
    (the revision did not reach "applied" in time), interrupted (a signal during a change).
    ``revision`` and ``revision_state`` name the revision a failed change made and what it is now
    (``deleted``, ``applied``, ``apply``... or ``unknown``), None when it made none.
    """

    def __init__(self, kind, message, status=None, revision=None, revision_state=None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.revision = revision
        self.revision_state = revision_state


# What normalize_address says of each problem split_address finds ({0}: the address as given).
_ADDRESS_PROBLEMS = {
    "empty": "the switch address is empty; give its NVUE API address, e.g. leaf01 or 10.0.0.5",
    "port": "switch address {0} has a port that is not a number",
    "scheme": "switch address {0} is not an http(s) address",
    "credentials": "the switch address must not carry credentials; use username and password",
}


def normalize_address(address):
    """'leaf01' / '10.0.0.5' / '10.0.0.5:8443' / 'https://leaf01' -> 'https://host:port' (8765 by default)."""

    def refuse(problem):
        return NvueError("usage", _ADDRESS_PROBLEMS[problem].format(address))

    parts = split_address(address, refuse, check_port=True)
    if parts.path not in ("", "/") or parts.query:
        raise NvueError("usage", "switch address %s must be scheme://host[:port] only" % address)
    host = "[%s]" % parts.hostname if ":" in parts.hostname else parts.hostname
    return urlunsplit((parts.scheme, "%s:%d" % (host, parts.port or DEFAULT_PORT), "", "", ""))


def api_path(path):
    """'qos/roce' / '/qos/roce' / '/nvue_v1/qos/roce' -> '/nvue_v1/qos/roce' (segments URL-quoted).

    A list is taken as segments already split: ``["revision", "changeset/cumulus/..."]`` sends the
    revision id as one segment, its slashes as %2F, as NVIDIA's examples do.
    """
    if isinstance(path, (list, tuple)):
        parts = [str(p) for p in path if p]
    else:
        parts = [p for p in str(path or "").split("/") if p]
    if parts and parts[0] == PREFIX.strip("/"):
        parts = parts[1:]
    for part in parts:
        if part in (".", "..") or not all(" " < ch <= "~" for ch in part):
            raise NvueError("usage", "NVUE path %r has a segment that is not a plain name" % (path,))
    return PREFIX + "".join("/" + quote(p, safe="") for p in parts)


def _segments(path):
    return [p for p in api_path(path)[len(PREFIX) :].split("/") if p]


def _leaves(node, prefix):
    """(segments, value) for every leaf of a PATCH body; an empty object is a leaf (a set member)."""
    if isinstance(node, dict) and node:
        for key in sorted(node):
            yield from _leaves(node[key], [*prefix, str(key)])
    else:
        yield prefix, node


_ABSENT = object()


def _at(tree, segments):
    node = tree
    for part in segments:
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def diff_patch(applied, path, payload):
    """The changes ``payload`` PATCHed at ``path`` makes to ``applied`` (the node at ``path``).

    Returns ``[{setting, from, to}]`` (results.change) for each leaf whose value differs; the
    setting is the NVUE path ``qos/pfc/default-global/rx``. A value the switch does not have is
    ``from: None``. An empty object (a member of a set such as ``switch-priority: {"3": {}}``)
    is "present" when it is there.
    """
    base = _segments(path)
    out = []
    for segments, value in _leaves(payload, []):
        current = _at(applied, segments) if applied is not None else _ABSENT
        if value == {}:
            if current is _ABSENT:
                out.append(change("/".join(base + segments), None, "present"))
            continue
        if current is _ABSENT or current != value:
            out.append(change("/".join(base + segments), None if current is _ABSENT else current, value))
    return out


class NvueClient(HttpsClient):
    """One switch's NVUE API. ``opener`` is open_url's signature; ``sleep`` and ``clock`` are replaceable."""

    DEVICE = "switch"
    API = "NVUE"
    ADDRESS_SETTING = ADDRESS_SETTING
    HTTP_REASON_SETTING = HTTP_REASON_SETTING
    CA_SETTING = CA_SETTING
    # an API answers where it is asked; a redirect is an error, not a new place to send a password
    FOLLOW_REDIRECTS = "none"
    SLOW_ADVICE = ", check its load and the management network"
    TOO_LARGE_NOTE = "; nothing of it was used"

    def __init__(self, address, username, password, name=None, clock=time.monotonic, retries=2, **transport):
        """``transport``: HttpsClient's options (validate_certs, ca_path, timeout, max_body,
        retry_delay, use_proxy, opener, sleep, insecure_http_reason)."""
        baseuri = normalize_address(address)
        self.name = name or urlsplit(baseuri).hostname
        self.where = "switch %s (%s)" % (self.name, baseuri) if name else "switch %s" % baseuri
        super().__init__(baseuri, username, password or "", retries=retries, **transport)
        self._clock = clock
        self._cache = {}

    # -- plumbing

    def _error(self, kind, message, status=None, revision=None, revision_state=None):
        text = str(message)
        if self._password:
            text = text.replace(self._password, _MASK)
        return NvueError(kind, text, status, revision, revision_state)

    def _config_error(self, exc):
        return self._error("config", "%s: %s" % (self.where, exc))

    def _url(self, path, rev=None):
        url = self.baseuri + api_path(path)
        return url + ("?rev=" + quote(rev, safe="") if rev else "")

    def _call(self, method, path, rev=None, body=None, deadline=None):
        """One request (only GETs retried); returns the parsed JSON body (None when empty).

        ``deadline`` (seconds, default ``timeout``) bounds each attempt on the wall clock."""
        shown = api_path(path) + ("?rev=%s" % rev if rev else "")
        deadline = self.timeout if deadline is None else deadline
        options = self._options(method, body, deadline, basic_auth=True)
        answer = self._send(method, self._url(path, rev), shown, options, deadline, retry=method == "GET")
        return self._json(answer.body, method, shown)

    def _detail(self, exc):
        try:
            doc = json.loads(exc.read() or b"{}")
        except (ValueError, OSError, AttributeError):
            return ""
        detail = (
            doc.get("detail") or doc.get("message") or doc.get("title") if isinstance(doc, dict) else None
        )
        return " ".join(str(detail).split())[:300] if detail else ""

    def _http_error(self, exc, method, shown):
        code = exc.code
        if code == 401:
            return self._error(
                "auth",
                "%s rejected the credentials (HTTP 401 on %s %s); check the vaulted NVUE username and "
                "password for this switch" % (self.where, method, shown),
                401,
            )
        if code == 403:
            return self._error(
                "auth",
                "%s refused %s %s (HTTP 403); the account needs the nvshow group to read and nvapply to "
                "change (Cumulus Linux 5.6+ also refuses the default cumulus password)"
                % (self.where, method, shown),
                403,
            )
        detail = self._detail(exc)
        if code == 404:
            return self._error(
                "not_found",
                "%s has no %s (HTTP 404%s)" % (self.where, shown, ": " + detail if detail else ""),
                404,
            )
        if code == 400:
            return self._error(
                "refused",
                "%s refused %s %s (HTTP 400%s)"
                % (self.where, method, shown, ": " + detail if detail else ""),
                400,
            )
        return self._error(
            "http",
            "%s answered %s %s with HTTP %d%s"
            % (self.where, method, shown, code, ": " + detail if detail else ""),
            code,
        )

    def _untrusted_message(self, detail):
        against = "CA file %s" % self.ca_path if self.ca_path else "the controller's system CA certificates"
        return (
            "TLS verification of %s failed against %s (%s); set %s to the PEM file of the CA that signed "
            "the switch's NVUE certificate (validate_certs: false only in a lab)"
            % (self.where, against, detail, CA_SETTING)
        )

    def _unreachable_message(self, detail, method, shown, retried):
        return (
            "could not reach %s (%s, %d retries) on %s %s; check the address and that the NVUE API is "
            "enabled and listening (nv set system api listening-address)"
            % (self.where, detail, retried, method, shown)
        )

    # -- reading (cached)

    def get(self, path, rev="operational"):
        """The node at ``path`` in revision ``rev``; read once per client, copies handed out.

        A node inside a subtree already read (``qos/pfc`` after ``qos``) is taken from it; one the
        subtree does not show (an operational-only leaf) is asked for.
        """
        full = api_path(path)
        key = (full, rev)
        if key not in self._cache:
            found = self._from_cached_ancestor(full, rev)
            self._cache[key] = found if found is not _ABSENT else self._call("GET", path, rev)
        return copy.deepcopy(self._cache[key])

    def _from_cached_ancestor(self, full, rev):
        for (cached, cached_rev), doc in self._cache.items():
            if cached_rev == rev and full.startswith(cached.rstrip("/") + "/") and isinstance(doc, dict):
                rest = [unquote(p) for p in full[len(cached.rstrip("/")) :].split("/") if p]
                node = _at(doc, rest)
                if node is not _ABSENT:
                    return node
        return _ABSENT

    def forget(self):
        """Drop the cache (after a change: the next read asks the switch again)."""
        self._cache.clear()

    def read_qos(self, rev="operational"):
        """The whole ``qos`` subtree (mapping, pfc, congestion-control, egress-queue-mapping, roce, ...)."""
        return self._object(self.get("qos", rev), "qos", rev)

    def read_roce(self, rev="operational"):
        """``qos/roce``: ``enable``/``mode``, and in the operational view NVUE's RoCE summary rows."""
        return self._object(self.read_qos(rev).get("roce"), "qos/roce", rev)

    def read_interfaces(self, rev="operational"):
        """Every interface (one GET of ``/nvue_v1/interface``), keyed by name."""
        return self._object(self.get("interface", rev), "interface", rev)

    def read_interface(self, port, rev="operational"):
        """One port (``link.mtu``, ``qos``...) from the interface tree; not_found when the switch lacks it."""
        interfaces = self.read_interfaces(rev)
        if port not in interfaces:
            raise self._error(
                "not_found",
                "%s has no interface %s (it has %d: %s)"
                % (self.where, port, len(interfaces), ", ".join(sorted(interfaces)[:8]) or "none"),
                404,
            )
        return self._object(interfaces[port], "interface/%s" % port, rev)

    def port_roce_status(self, port):
        """``interface/<port>/qos/roce/status`` (operational): from the interface tree when it is there."""
        status = self.read_interface(port, "operational").get("qos", {}).get("roce", {}).get("status")
        if isinstance(status, dict):
            return status
        return self._object(
            self.get("interface/%s/qos/roce/status" % port), "roce status of %s" % port, "operational"
        )

    def _object(self, doc, what, rev):
        if not isinstance(doc, dict):
            raise self._error(
                "protocol", "%s answered %s (rev %s) without a JSON object" % (self.where, what, rev)
            )
        return doc

    # -- changing

    def plan(self, patches):
        """The changes ``patches`` (``{path: body}``) would make to the applied configuration."""
        changes = []
        for path, body in patches.items():
            if not isinstance(body, dict):
                raise self._error("usage", "the patch for %s must be a JSON object" % api_path(path))
            try:
                applied = self.get(path, "applied")
            except NvueError as exc:
                if exc.kind != "not_found":
                    raise
                applied = None
            changes.extend(diff_patch(applied, path, body))
        return changes

    def revision_state(self, rev, deadline=None):
        doc = self._call("GET", ["revision", rev], deadline=deadline)
        if not isinstance(doc, dict) or not isinstance(doc.get("state"), str):
            raise self._error("protocol", "%s answered GET revision %s without a state" % (self.where, rev))
        return doc

    def apply(self, patches, timeout=60.0, poll=0.5):
        """Apply ``patches`` (``{path: body}``) through one revision; wait until it is applied.

        Returns ``{changed, changes, revision}``; nothing is sent but reads when the switch already
        has every value. Raises NvueError (apply) when the revision fails, naming its state and the
        switch's issue, and (timeout) when it is not applied within ``timeout`` seconds. Whatever
        ends it early (an error, KeyboardInterrupt) leaves no revision of its own pending: see
        ``_settle``; an interrupt becomes NvueError (interrupted) naming the revision and its state.
        """
        changes = self.plan(patches)
        if not changes:
            return {"changed": False, "changes": [], "revision": None}
        created = self._call("POST", "revision")
        if not isinstance(created, dict) or len(created) != 1:
            raise self._error(
                "protocol", "%s answered POST %s without one new revision" % (self.where, REVISION)
            )
        rev = next(iter(created))
        self.forget()
        try:
            return self._patch_and_apply(rev, patches, changes, timeout, poll)
        except NvueError as exc:
            if exc.revision is not None:  # settled already (the revision failed or timed out)
                raise
            state, note = self._settle(rev, min(float(self.timeout) * 2, 30.0), poll)
            raise self._error(exc.kind, "%s; %s" % (exc, note), exc.status, rev, state) from None
        except KeyboardInterrupt as exc:
            state, note = self._settle(rev, INTERRUPT_WAIT_S, poll)
            why = str(exc) or "an interrupt"
            raise self._error(
                "interrupted", "%s: %s while changing it; %s" % (self.where, why, note), None, rev, state
            ) from None

    def _patch_and_apply(self, rev, patches, changes, timeout, poll):
        for path, body in patches.items():
            self._call("PATCH", path, rev, body)
        self._call("PATCH", ["revision", rev], body=APPLY_BODY)
        deadline = self._clock() + float(timeout)
        while True:
            doc = self.revision_state(rev)
            state = doc["state"]
            if state == "applied":
                return {"changed": True, "changes": changes, "revision": rev}
            if state in FAILED_STATES:
                state, note = self._settle(rev, float(self.timeout), poll, doc)
                raise self._error(
                    "apply",
                    "%s did not apply revision %s: it is %s%s; the switch keeps its previous configuration"
                    " (%s)" % (self.where, rev, doc["state"], _issues(doc), note),
                    None,
                    rev,
                    state,
                )
            if self._clock() >= deadline:
                raise self._error(
                    "timeout",
                    "%s did not apply revision %s within %ss (it is %s, and may still be applied); see "
                    "nv config history on the switch" % (self.where, rev, timeout, state),
                    None,
                    rev,
                    state,
                )
            self._sleep(poll)

    def _settle(self, rev, budget, poll, doc=None):
        """What became of revision ``rev`` after a change ended early, within ``budget`` seconds:
        applied (kept), still applying (waited for), anything else deleted. Returns ``(state,
        note)``; state is the last one read (``deleted`` once deleted, ``unknown`` if unread)."""
        end = self._clock() + float(budget)
        state = None
        try:
            while True:
                left = end - self._clock()
                if doc is None:
                    if left <= 0:
                        break
                    doc = self.revision_state(rev, deadline=min(float(self.timeout), left))
                state = doc["state"]
                if state in KEEP_STATES:
                    return state, "revision %s was applied before it ended" % rev
                if state not in BUSY_STATES:
                    left = end - self._clock()
                    if left <= 0:
                        break
                    try:
                        self._call("DELETE", ["revision", rev], deadline=min(float(self.timeout), left))
                    except NvueError as exc:
                        if exc.kind != "refused":
                            raise
                        doc = None  # it moved on since it was read (an apply request in flight): again
                        continue
                    return "deleted", "revision %s (%s) was deleted: nothing of it applied" % (rev, state)
                if end - self._clock() <= poll:
                    break
                self._sleep(poll)
                doc = None
        except NvueError as exc:
            return (
                state or "unknown",
                "revision %s is left %s on the switch (%s); delete it there with nv "
                "config detach or see nv config history" % (rev, state or "in an unknown state", exc),
            )
        return state or "unknown", "revision %s is left %s on the switch after %ss; see nv config history" % (
            rev,
            state or "in an unknown state",
            seconds(budget),
        )


def _issues(doc):
    issue = (doc.get("transition") or {}).get("issue") if isinstance(doc.get("transition"), dict) else None
    if not isinstance(issue, dict) or not issue:
        return ""
    texts = [str(v.get("message", v)) if isinstance(v, dict) else str(v) for v in issue.values()]
    return " (%s)" % "; ".join(" ".join(t.split())[:200] for t in texts)


_CLIENTS = {}


def client_for(address, username, password, **options):
    """The process's one client for a switch, so every caller shares its cache (one read per run)."""
    key = (normalize_address(address), username, options.get("ca_path"), options.get("validate_certs", True))
    client = _CLIENTS.get(key)
    if client is None or client._password != (password or ""):
        client = NvueClient(address, username, password, **options)
        _CLIENTS[key] = client
    return client
