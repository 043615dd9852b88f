# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Redfish coolant readings: a small client on Ansible's open_url and pure parsers.

The parsers take Redfish JSON documents (dicts) and return plain data. A reading the BMC
does not give (property absent, ``Reading: null``, a non-number) is None, never 0, so a gate
can tell "no flow sensor" from "no flow".

The client follows links from the service root (``/redfish/v1``) to
``Chassis/<id>/ThermalSubsystem/CoolantConnectors/<id>``, the chassis' leak detectors (its
``LeakDetectors`` collection, else the deprecated ``ThermalSubsystem/LeakDetection``) and, when
the service has them, to ``ThermalEquipment/CDUs/<id>`` with their coolant connectors and leak
detection, as DMTF's public-liquid-cooled-server and public-cooling-unit mockups shape them. It
authenticates with a Redfish session (POST to the session collection, ``X-Auth-Token``, DELETE at the end) or
HTTP basic auth, verifies TLS by default, and retries connection errors and HTTP 503 with
exponential backoff, but not a refusal whose Redfish error says the BMC's session limit is full
(``SessionLimitExceeded``: NOT_RETRIED); an HTTP error names what the BMC's error answer said (its
MessageIds and messages, error_messages). Every request has a wall-clock deadline on all of it
(``timeout``: connect, send, the whole answer) and an answer is at most ``max_body`` bytes
(https_transport.HttpsClient, which the NVUE client is too). Credentials and the session token
never appear in its messages.

It fails closed and raises only RedfishError: a plain-HTTP address (without a stated reason) or
an unusable CA file is refused before any request (transport_security, the rule every management
client shares); a body that is not JSON or is nested past Python's recursion limit, and a reading
that is not finite, overflows a float or lies outside its physical range, are errors naming the
BMC, never a number a gate could pass.

Runs on the controller (the BMCs sit on the management network); stdlib plus
ansible.module_utils only.
"""

from __future__ import annotations

import json
import math
import signal
from urllib.parse import urlsplit, urlunsplit

from ansible_collections.gpufleet.node.plugins.module_utils.core import signals
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import https_transport
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.https_transport import (
    RETRY_STATUS,
    HttpsClient,
)

SERVICE_ROOT = "/redfish/v1"
# Health and DetectorState values in rising order of trouble (Resource.Health, LeakDetector.DetectorState).
HEALTH_ORDER = ("OK", "Warning", "Critical")
# Members whose Status.State says they are not there are not read as failed readings.
_NOT_PRESENT = frozenset(("Absent",))
# Never wait longer than this for one Retry-After, whatever the BMC asks for.
_MAX_RETRY_AFTER_S = 30.0
# The Redfish error answers (MessageId's last part) that another try within seconds cannot change: a
# session frees only when its holder logs out or it times out (SessionService.SessionTimeout,
# minutes), so a full session limit is said at once, with what the BMC said, never retried.
NOT_RETRIED = frozenset(("SessionLimitExceeded",))
# How much of a BMC's own error message is quoted (its messages, one line each).
_MAX_SAID = 400
# Collections are paged with Members@odata.nextLink; a BMC that loops is cut off here.
_MAX_PAGES = 50
# Physical ranges of the readings (low, high, unit). A reading outside is a faulty sensor or
# firmware, not a state of the loop: no facility or CDU loop moves 10 m3/min, coolant is neither
# below -40 C nor above 150 C, and supply and return never differ by more than 100 K.
FLOW_RANGE = (0.0, 10000.0, "L/min")
TEMPERATURE_RANGE = (-40.0, 150.0, "C")
DELTA_RANGE = (-100.0, 100.0, "K")
# The settings the messages name: the module option and the role input / inventory variable.
ADDRESS_SETTING = "baseuri (thermal_gate_bmc_address, or gpufleet_bmc_address in inventory)"
HTTP_REASON_SETTING = "insecure_http_reason (thermal_gate_bmc_insecure_http_reason)"
CA_SETTING = "ca_path (thermal_gate_bmc_ca_path, or gpufleet_bmc_ca_path in inventory)"


class RedfishError(Exception):
    """A request failed in a way the operator must fix; ``kind`` says which way.

    kind is one of: auth (HTTP 401/403), not_found (404), connection (refused, timeout,
    unreachable, after retries), deadline (no whole answer within the request's deadline, never
    retried), too_large (an answer over the size limit), tls (certificate verification), http
    (other statuses, 503
    after retries), protocol (not JSON, nested too deeply, not Redfish), reading (a reading that
    is not finite or outside its physical range), config (a plain-HTTP address without a reason,
    an unusable CA file: found before any request, never retried), usage (no usable address).
    """

    def __init__(self, kind, message, status=None, message_ids=()):
        super().__init__(message)
        self.kind = kind
        self.status = status
        # the MessageIds of the BMC's Redfish error answer (error_messages), when it gave one
        self.message_ids = tuple(message_ids)


# ---------------------------------------------------------------- parsing (pure)


def reading(value, what="reading", valid=None):
    """A Redfish SensorExcerpt (``{"Reading": 14.8, ...}``) or plain number -> float or None.

    None when there is no number (absent, null, a string, a bool). A number that is not finite
    (JSON's 1e999 is inf, NaN), too large for a float, or outside ``valid`` (low, high, unit)
    raises RedfishError (kind reading) naming ``what``: a gate must not judge it, nor read it as
    missing.
    """
    if isinstance(value, dict):
        value = value.get("Reading")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        raise RedfishError(
            "reading", "%s is a %d-digit integer, too large to be a reading" % (what, len(str(abs(value))))
        ) from None
    if not math.isfinite(number):
        raise RedfishError("reading", "%s is %s, not a finite number" % (what, number))
    if valid is not None and not valid[0] <= number <= valid[1]:
        low, high, unit = valid
        raise RedfishError(
            "reading",
            "%s reads %s %s, outside the physical range %s..%s %s"
            % (what, _num(number), unit, _num(low), _num(high), unit),
        )
    return number


def _num(value):
    return "%d" % value if float(value).is_integer() and abs(value) < 1e15 else "%g" % value


def _list(value):
    return value if isinstance(value, list) else []


def _state(doc):
    return _text(_status(doc).get("State"))


def _status(doc):
    status = doc.get("Status") if isinstance(doc, dict) else None
    return status if isinstance(status, dict) else {}


def _text(value):
    return value if isinstance(value, str) and value else None


def worst(states):
    """The most severe of Health/DetectorState values; None when there is none.

    A value outside HEALTH_ORDER (a vendor string) counts as worse than Critical: it is not
    known to be fine.
    """
    known = [s for s in states if s is not None]
    if not known:
        return None

    def rank(state):
        return HEALTH_ORDER.index(state) if state in HEALTH_ORDER else len(HEALTH_ORDER)

    return max(known, key=rank)


# connector field -> (CoolantConnector property, physical range)
_CONNECTOR_READINGS = (
    ("flow_lpm", "FlowLitersPerMinute", FLOW_RANGE),
    ("rated_flow_lpm", "RatedFlowLitersPerMinute", FLOW_RANGE),
    ("supply_c", "SupplyTemperatureCelsius", TEMPERATURE_RANGE),
    ("return_c", "ReturnTemperatureCelsius", TEMPERATURE_RANGE),
    ("delta_c", "DeltaTemperatureCelsius", DELTA_RANGE),
)


def parse_connector(doc, key=None):
    """One CoolantConnector resource -> its readings.

    Returns ``{key, id, name, uri, state, health, flow_lpm, rated_flow_lpm, supply_c,
    return_c, delta_c, delta_computed, leak, leak_detectors, leak_detector_uris}``. delta_c is
    DeltaTemperatureCelsius when the BMC gives it, else return - supply when both exist
    (delta_computed true), else None. leak is filled in by the caller from the connector's
    own detectors or its chassis'. A reading that is not finite or outside its physical range
    raises RedfishError (kind reading) naming the connector and the property.
    """
    status = _status(doc)
    key = key or _text(doc.get("Id"))
    uri = _text(doc.get("@odata.id"))
    where = "coolant connector %s%s" % (key, " (%s)" % uri if uri else "")
    values = {}
    for field, prop, valid in _CONNECTOR_READINGS:
        try:
            values[field] = reading(doc.get(prop), "%s %s" % (where, prop), valid)
        except RedfishError as exc:
            raise RedfishError(
                "reading",
                "%s; the sensor or the BMC firmware is faulty, so the loop cannot be judged (fail closed)"
                % exc,
            ) from None
    supply, ret, delta = values["supply_c"], values["return_c"], values["delta_c"]
    computed = False
    if delta is None and supply is not None and ret is not None:
        delta = round(ret - supply, 2)
        computed = True
    uris = [
        d["@odata.id"]
        for d in _list(doc.get("LeakDetectors"))
        if isinstance(d, dict) and isinstance(d.get("@odata.id"), str)
    ]
    return {
        "key": key,
        "id": _text(doc.get("Id")),
        "name": _text(doc.get("Name")),
        "uri": uri,
        "state": _text(status.get("State")),
        "health": _text(status.get("Health")),
        "flow_lpm": values["flow_lpm"],
        "rated_flow_lpm": values["rated_flow_lpm"],
        "supply_c": supply,
        "return_c": ret,
        "delta_c": delta,
        "delta_computed": computed,
        "leak": None,
        "leak_detectors": [],
        "leak_detector_uris": uris,
    }


def parse_leak_detector(doc):
    """One LeakDetector resource -> ``{name, uri, state}`` (None when it is not present)."""
    if _state(doc) in _NOT_PRESENT:
        return None
    return {
        "name": _text(doc.get("Name")) or _text(doc.get("Id")),
        "uri": _text(doc.get("@odata.id")),
        "state": _text(doc.get("DetectorState")),
    }


def parse_leak_detection(doc):
    """A LeakDetection resource -> (detectors from its LeakDetectorGroups, LeakDetectors link).

    The groups carry each detector's DetectorState inline, so the common case needs no
    further request; the link is for services that list detectors only in the collection.
    """
    detectors = []
    for group in _list(doc.get("LeakDetectorGroups")):
        if not isinstance(group, dict):
            continue
        for det in _list(group.get("Detectors")):
            if isinstance(det, dict):
                detectors.append(
                    {
                        "name": _text(det.get("DeviceName")),
                        "uri": _text(det.get("DataSourceUri")),
                        "state": _text(det.get("DetectorState")),
                    }
                )
    return detectors, _link(doc, "LeakDetectors")


def leak_state(detectors):
    """Worst DetectorState of the detectors; None when no detector reports one."""
    return worst(d.get("state") for d in detectors)


def coolant_report(service, chassis, cdus):
    """Assemble the coolant_facts result from what the client read.

    ``chassis`` is ``[{id, uri, health, leak_detectors, connectors}]``; ``cdus`` is
    ``[{id, name, uri, state, health, health_rollup, conditions, leak_detectors, connectors}]``.
    Each connector gets ``leak``: the worst state of its own detectors, else of its chassis'
    (or CDU's), else None. Returns ``{service, chassis, connectors, cdus}``; connectors is
    the flat list of every chassis connector (the node's cold-plate loops).
    """
    connectors = []
    for box in chassis:
        box["leak"] = leak_state(box["leak_detectors"])
        for conn in box["connectors"]:
            _inherit_leak(conn, box["leak_detectors"])
            connectors.append(conn)
    for cdu in cdus:
        cdu["leak"] = leak_state(cdu["leak_detectors"])
        for conn in cdu["connectors"]:
            _inherit_leak(conn, cdu["leak_detectors"])
    return {"service": service, "chassis": chassis, "connectors": connectors, "cdus": cdus}


def _inherit_leak(conn, fallback):
    own = conn["leak_detectors"]
    conn["leak"] = leak_state(own) if own else leak_state(fallback)


def error_messages(raw):
    """A Redfish error answer's messages, [(MessageId, Message)]: ``@Message.ExtendedInfo``'s, else the
    error's own ``code`` and ``message``; [] for a body that is not one (the status then says it all)."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError, TypeError):
        return []
    error = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(error, dict):
        return []
    found = [
        (_text(info.get("MessageId")) or "", _text(info.get("Message")) or "")
        for info in _list(error.get("@Message.ExtendedInfo"))
        if isinstance(info, dict) and (_text(info.get("MessageId")) or _text(info.get("Message")))
    ]
    if not found and (_text(error.get("code")) or _text(error.get("message"))):
        found = [(_text(error.get("code")) or "", _text(error.get("message")) or "")]
    return found


def _not_retried(message_ids):
    """Whether one of a Redfish error's MessageIds (Registry.Version.Id) is one of NOT_RETRIED."""
    return any(m.rsplit(".", 1)[-1] in NOT_RETRIED for m in message_ids)


def _one_line(text):
    """Text from a BMC, safe to quote: control characters and runs of space as one space."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


# What normalize_baseuri says of each problem split_address finds ({0}: the baseuri as given).
_BASEURI_PROBLEMS = {
    "empty": "baseuri is empty; give the BMC's address, e.g. 10.20.1.11 or https://bmc01",
    "scheme": "baseuri {0} is not an http(s) address of a BMC",
    "credentials": "baseuri must not carry credentials; use username and password",
}


def normalize_baseuri(baseuri):
    """'10.0.0.5' / '10.0.0.5:8443' / 'https://bmc01' -> 'https://10.0.0.5[:port]' (no path)."""
    parts = https_transport.split_address(
        baseuri, lambda problem: RedfishError("usage", _BASEURI_PROBLEMS[problem].format(baseuri))
    )
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


# ---------------------------------------------------------------- the client


def _link(doc, name):
    value = doc.get(name) if isinstance(doc, dict) else None
    return _text(value.get("@odata.id")) if isinstance(value, dict) else None


def decode_json(raw, where):
    """An HTTP body -> the JSON value; RedfishError (protocol) naming ``where`` when it cannot be read.

    ``where`` is e.g. "BMC https://bmc01 answered GET /redfish/v1" (https_transport.decode_json).
    """
    return https_transport.decode_json(raw, where, RedfishError)


def _usable_path(path):
    """A link http.client can send: printable ASCII without spaces (else urllib raises ValueError)."""
    return isinstance(path, str) and bool(path) and all("!" <= ch <= "~" for ch in path)


def _exit_status(signum):
    return SystemExit(128 + signum)


class RedfishClient(HttpsClient):
    """Reads a Redfish service; use as a context manager so a session is always closed.

    ``opener`` is open_url's signature (tests pass open_url itself against a local server);
    ``sleep`` is time.sleep, replaceable so retry tests do not wait.
    """

    DEVICE = "BMC"
    API = "Redfish"
    ADDRESS_SETTING = ADDRESS_SETTING
    HTTP_REASON_SETTING = HTTP_REASON_SETTING
    CA_SETTING = CA_SETTING
    HEADERS = (("Accept", "application/json"), ("OData-Version", "4.0"))
    FOLLOW_REDIRECTS = "safe"

    def __init__(self, baseuri, username, password, auth="session", **transport):
        """``auth``: session or basic; ``transport``: HttpsClient's options (validate_certs, ca_path,
        timeout, max_body, retries, retry_delay, use_proxy, opener, sleep, insecure_http_reason)."""
        baseuri = normalize_baseuri(baseuri)
        self.where = "BMC %s" % baseuri
        super().__init__(baseuri, username, password, **transport)
        self.auth = auth
        self._saved_sigterm = None
        self._token = None
        self.session_uri = None

    # -- plumbing

    def _error(self, kind, message, status=None):
        return RedfishError(kind, message, status)

    def _url(self, path):
        if not _usable_path(path):
            raise RedfishError(
                "protocol",
                "BMC %s linked to %s, which is not a usable URI" % (self.baseuri, ("%r" % (path,))[:200]),
            )
        if path.startswith(("http://", "https://")):
            parts = urlsplit(path)
            if urlunsplit((parts.scheme, parts.netloc, "", "", "")) != self.baseuri:
                raise RedfishError("protocol", "BMC %s linked outside itself (%s)" % (self.baseuri, path))
            return path
        return self.baseuri + (path if path.startswith("/") else "/" + path)

    def _call(self, method, path, body=None, authenticate=True):
        """One request with retries; returns (status, headers, parsed JSON or None)."""
        url = self._url(path)
        basic = authenticate and not self._token and self.auth == "basic"
        options = self._options(method, body, self.timeout, basic)
        if authenticate and self._token:
            options["headers"]["X-Auth-Token"] = self._token
        answer = self._send(method, url, path, options, self.timeout)
        return answer.status, answer.headers, self._json(answer.body, method, path)

    def _json(self, raw, method, shown):
        try:
            return super()._json(raw, method, shown)
        except RedfishError:
            if method == "DELETE":  # the session is gone whatever the BMC said about it
                return None
            raise

    @staticmethod
    def _retry_after(exc, delay):
        value = exc.headers.get("Retry-After") if exc.headers else None
        try:
            wait = float(value)
        except (TypeError, ValueError):
            return delay
        # NaN is no wait at all (time.sleep refuses it); inf is the longest wait there is.
        return min(max(wait, 0.0), _MAX_RETRY_AFTER_S) if not math.isnan(wait) else delay

    def _said(self, messages):
        """What the BMC said (error_messages), quoted for a message: one line, bounded, never the
        password (a BMC may echo a property's value)."""
        text = _one_line("; ".join(": ".join(p for p in pair if p) for pair in messages))
        if self._password:
            text = text.replace(self._password, "********")
        return text if len(text) <= _MAX_SAID else text[: _MAX_SAID - 3] + "..."

    def _worth_retrying(self, err):
        return not _not_retried(err.message_ids)

    def _http_error(self, exc, method, shown):
        code = exc.code
        where = "BMC %s" % self.baseuri
        try:
            messages = error_messages(exc.read())
        except (OSError, ValueError, AttributeError):
            messages = []
        ids = [pair[0] for pair in messages if pair[0]]
        said = self._said(messages)
        if _not_retried(ids):
            return RedfishError(
                "http",
                "%s refused %s %s with HTTP %d: its session limit is full; the BMC said: %s. Not retried "
                "(a session frees when its holder logs out or it times out, SessionService.SessionTimeout): "
                "close the stale sessions on the BMC (SessionService/Sessions) or wait for them to expire; "
                "auth: basic needs no session" % (where, method, shown, code, said.rstrip(".")),
                code,
                ids,
            )
        error = self._status_error(code, where, method, shown)
        if said:
            error = RedfishError(error.kind, "%s; the BMC said: %s" % (error, said), error.status, ids)
        return error

    def _status_error(self, code, where, method, shown):
        if code == 401:
            how = (
                "session login" if shown.endswith("/Sessions") and method == "POST" else "%s auth" % self.auth
            )
            return RedfishError(
                "auth",
                "%s rejected the credentials (HTTP 401 on %s %s, %s); check the vaulted BMC username "
                "and password for this host" % (where, method, shown, how),
                401,
            )
        if code == 403:
            return RedfishError(
                "auth",
                "%s refused %s %s (HTTP 403); the BMC account needs at least the ReadOnly role"
                % (where, method, shown),
                403,
            )
        if code == 404:
            return RedfishError(
                "not_found",
                "%s has no %s (HTTP 404); check baseuri and that the BMC firmware implements Redfish "
                "ThermalSubsystem/CoolantConnectors" % (where, shown),
                404,
            )
        if code in RETRY_STATUS:
            return RedfishError(
                "http",
                "%s answered %s %s with HTTP %d after %d retries; the BMC is busy or restarting, try again "
                "later" % (where, method, shown, code, self.retries),
                code,
            )
        return RedfishError("http", "%s answered %s %s with HTTP %d" % (where, method, shown, code), code)

    def _untrusted_message(self, detail):
        return (
            "TLS verification of BMC %s failed (%s); set ca_path to the CA that signed the BMC's "
            "certificate (validate_certs: false only in a lab)" % (self.baseuri, detail)
        )

    def _unreachable_message(self, detail, method, shown, retried):
        return (
            "could not reach BMC %s (%s, %d retries) reading %s; check the BMC address and that its Redfish "
            "service is up on the management network" % (self.baseuri, detail, retried, shown)
        )

    def get(self, path):
        _status, _headers, doc = self._call("GET", path)
        if not isinstance(doc, dict):
            raise RedfishError(
                "protocol", "BMC %s answered GET %s without a JSON object" % (self.baseuri, path)
            )
        return doc

    def post_action(self, path, body):
        """POST ``body`` to an action's target (ComputerSystem.Reset), sent once: an action is not
        retried, as a second reset is a second reboot. Returns the HTTP status (204: no body)."""
        saved, self.retries = self.retries, 0
        try:
            status, _headers, _doc = self._call("POST", path, body=body)
        finally:
            self.retries = saved
        return status

    def members(self, path):
        """Every member URI of a collection, following Members@odata.nextLink pages."""
        uris, page, pages = [], path, 0
        while page and pages < _MAX_PAGES:
            doc = self.get(page)
            uris.extend(
                m["@odata.id"]
                for m in _list(doc.get("Members"))
                if isinstance(m, dict) and _text(m.get("@odata.id"))
            )
            page = _text(doc.get("Members@odata.nextLink"))
            pages += 1
        return uris

    # -- session

    def __enter__(self):
        # A gate stopped while the BMC is read (SIGTERM to the module's process) would leave the
        # session open, and a BMC with leaked sessions refuses the next login: SIGTERM unwinds
        # through __exit__ instead, which deletes the session.
        self._unwinding = signals.unwinding((signal.SIGTERM,), _exit_status)
        self._unwinding.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            self.logout()
        finally:
            self._unwinding.__exit__(None, None, None)
        return False

    def login(self, root):
        """Open a session when auth is session; basic auth needs nothing."""
        if self.auth != "session":
            return
        links = root.get("Links") if isinstance(root.get("Links"), dict) else {}
        sessions = _link(links, "Sessions") or SERVICE_ROOT + "/SessionService/Sessions"
        try:
            _status, headers, doc = self._call(
                "POST",
                sessions,
                body={"UserName": self._username, "Password": self._password},
                authenticate=False,
            )
        except RedfishError as exc:
            if exc.kind == "not_found" or exc.status == 405:
                raise RedfishError(
                    "http",
                    "BMC %s does not accept Redfish sessions at %s (HTTP %s); set auth: basic"
                    % (self.baseuri, sessions, exc.status),
                    exc.status,
                ) from None
            raise
        token = headers.get("x-auth-token")
        if not token:
            raise RedfishError(
                "protocol", "BMC %s created a session without an X-Auth-Token; set auth: basic" % self.baseuri
            )
        self._token = token
        self.session_uri = headers.get("location") or _text(
            doc.get("@odata.id") if isinstance(doc, dict) else None
        )

    @property
    def token(self):
        return self._token

    def logout(self):
        """DELETE the session; a failure here is not worth failing the read for (it expires)."""
        if not self._token:
            return None
        uri, self.session_uri = self.session_uri, None
        try:
            if uri:
                saved, self.retries = self.retries, 0
                try:
                    self._call("DELETE", uri)
                finally:
                    self.retries = saved
                return None
            return (
                "BMC %s did not say where its session lives; it stays open until it times out" % self.baseuri
            )
        except RedfishError as exc:
            return "could not close the Redfish session on BMC %s (%s); it expires on its own" % (
                self.baseuri,
                exc.kind,
            )
        finally:
            self._token = None

    # -- discovery

    def _detectors(self, uris):
        found = []
        for uri in uris:
            det = parse_leak_detector(self.get(uri))
            if det is not None:
                found.append(det)
        return found

    def _leak_detection(self, uri):
        detectors, link = parse_leak_detection(self.get(uri))
        if not detectors and link:
            detectors = self._detectors(self.members(link))
        return detectors

    def _connectors(self, collection, prefix):
        out = []
        for uri in self.members(collection):
            doc = self.get(uri)
            if _state(doc) in _NOT_PRESENT:
                continue
            try:
                conn = parse_connector(
                    doc, key="%s/%s" % (prefix, _text(doc.get("Id")) or uri.rstrip("/").rsplit("/", 1)[-1])
                )
            except RedfishError as exc:
                raise RedfishError(exc.kind, "BMC %s: %s" % (self.baseuri, exc)) from None
            conn["leak_detectors"] = self._detectors(conn.pop("leak_detector_uris"))
            out.append(conn)
        return out

    def _chassis_detectors(self, chassis, thermal_subsystem):
        """The chassis' leak detectors: its LeakDetectors collection (Chassis v1_26+) when it lists
        any, else ThermalSubsystem/LeakDetection, which that collection deprecates but which BMCs of
        older firmware serve alone."""
        current = _link(chassis, "LeakDetectors")
        uris = self.members(current) if current else []
        if uris:
            return self._detectors(uris)
        deprecated = _link(thermal_subsystem, "LeakDetection")
        return self._leak_detection(deprecated) if deprecated else []

    def _chassis(self, uri):
        doc = self.get(uri)
        cid = _text(doc.get("Id")) or uri.rstrip("/").rsplit("/", 1)[-1]
        thermal = _link(doc, "ThermalSubsystem")
        if not thermal:
            return None
        sub = self.get(thermal)
        detectors = self._chassis_detectors(doc, sub)
        connectors = (
            self._connectors(_link(sub, "CoolantConnectors"), cid) if _link(sub, "CoolantConnectors") else []
        )
        return {
            "id": cid,
            "uri": uri,
            "health": _text(_status(doc).get("Health")),
            "leak_detectors": detectors,
            "connectors": connectors,
        }

    def _cdu(self, uri):
        doc = self.get(uri)
        cid = _text(doc.get("Id")) or uri.rstrip("/").rsplit("/", 1)[-1]
        status = _status(doc)
        connectors = []
        for link, side in (
            ("PrimaryCoolantConnectors", "primary"),
            ("SecondaryCoolantConnectors", "secondary"),
            ("CoolantConnectors", "connector"),
        ):
            if _link(doc, link):
                for conn in self._connectors(_link(doc, link), "CDU%s/%s" % (cid, side)):
                    conn["side"] = side
                    connectors.append(conn)
        conditions = [
            {"message": _text(c.get("Message")), "severity": _text(c.get("Severity"))}
            for c in _list(status.get("Conditions"))
            if isinstance(c, dict) and c.get("Severity") not in (None, "OK")
        ]
        return {
            "id": cid,
            "name": _text(doc.get("Name")),
            "uri": uri,
            "state": _text(status.get("State")),
            "health": _text(status.get("Health")),
            "health_rollup": _text(status.get("HealthRollup")),
            "conditions": conditions,
            "leak_detectors": self._leak_detection(_link(doc, "LeakDetection"))
            if _link(doc, "LeakDetection")
            else [],
            "connectors": connectors,
        }

    def read_coolant(self, chassis_ids=None, cdus=True):
        """Log in, walk the links, return coolant_report(...); the caller closes the session."""
        root = self.get(SERVICE_ROOT)
        if "@odata.id" not in root and "RedfishVersion" not in root:
            raise RedfishError(
                "protocol", "%s%s is not a Redfish service root" % (self.baseuri, SERVICE_ROOT)
            )
        self.login(root)
        service = {
            "baseuri": self.baseuri,
            "redfish_version": _text(root.get("RedfishVersion")),
            "uuid": _text(root.get("UUID")),
        }
        chassis = []
        if _link(root, "Chassis"):
            for uri in self.members(_link(root, "Chassis")):
                cid = uri.rstrip("/").rsplit("/", 1)[-1]
                if chassis_ids and cid not in chassis_ids:
                    continue
                box = self._chassis(uri)
                if box is not None:
                    chassis.append(box)
        missing = sorted(set(chassis_ids or ()) - {b["id"] for b in chassis})
        if missing:
            raise RedfishError(
                "not_found",
                "BMC %s has no chassis %s with a ThermalSubsystem; it has: %s"
                % (self.baseuri, ", ".join(missing), ", ".join(b["id"] for b in chassis) or "none"),
            )
        found_cdus = []
        if cdus and _link(root, "ThermalEquipment"):
            equipment = self.get(_link(root, "ThermalEquipment"))
            if _link(equipment, "CDUs"):
                found_cdus = [self._cdu(uri) for uri in self.members(_link(equipment, "CDUs"))]
        return coolant_report(service, chassis, found_cdus)
