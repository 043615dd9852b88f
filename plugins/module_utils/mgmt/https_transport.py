# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""HttpsClient: what the Redfish and NVUE clients share on the way to their device.

- the constructor applies transport_security's rules before anything is sent (no ``http://``
  without a stated reason, kept as ``transport_hint``; a named CA file must be a PEM file), a
  TransportConfigError becoming the client's own error of kind ``config``;
- ``_options`` builds open_url's arguments (the client's headers and redirect rule, basic auth
  when asked);
- ``_send`` sends one request under its deadline and size cap (bounded_request), tries it again
  after a connection error or HTTP 502/503/504 with exponential backoff (``retry_delay`` doubled
  each time, ``_retry_after`` may say otherwise; ``_worth_retrying`` may refuse an answer that
  says another try is pointless), never after a TLS failure, a deadline or an oversized answer,
  and tells the failures apart (deadline, too_large, tls, connection and what ``_http_error``
  says of a status);
- ``_json`` reads an answer's JSON; a body that is not JSON is the device's fault (protocol).

A subclass names its device (``DEVICE``, ``API``, the three settings the messages name, its
``HEADERS`` and ``FOLLOW_REDIRECTS``), sets ``where`` (how messages name it) before calling this
constructor, and gives ``_error(kind, message, status=None)`` (its exception), ``_http_error``
and the messages of a failure below HTTP (``_untrusted_message``, ``_unreachable_message``).
Runs on the controller; stdlib plus ansible.module_utils only.
"""

from __future__ import annotations

import http.client
import json
import time
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit

from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import open_url
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.transport_security import (
    MAX_BODY,
    BodyTooLarge,
    DeadlineExceeded,
    TransportConfigError,
    bounded_request,
    check_ca_file,
    request_options,
    require_tls,
    seconds,
    size,
    transport_failure,
)

# HTTP statuses of a busy or restarting device (or the proxy in front of its API); worth another try.
RETRY_STATUS = frozenset((502, 503, 504))


def decode_json(raw, where, error):
    """An HTTP body -> the JSON value; ``error("protocol", message)`` naming ``where`` when it cannot
    be read. Not UTF-8, not JSON, an integer past Python's digit limit, or nesting past its recursion
    limit are all the device's fault."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise error("protocol", "%s with JSON nested too deeply to read" % where) from None
    except ValueError:
        raise error("protocol", "%s with something that is not JSON" % where) from None


def split_address(address, refuse, check_port=False):
    """A device's address ('host', 'host:port', 'http(s)://host[:port]'; https when it names no
    scheme) -> its urlsplit parts. Each problem raises ``refuse(problem)``, the caller's error:
    ``empty``, ``port`` (not a number; looked at only with check_port), ``scheme`` (not http(s), or
    no host) or ``credentials`` (a user or password in it)."""
    text = (address or "").strip()
    if not text:
        raise refuse("empty")
    if "://" not in text:
        text = "https://" + text
    parts = urlsplit(text)
    if check_port:
        try:
            parts.port  # noqa: B018 - reading it is the check: ValueError on a port that is not a number
        except ValueError:
            raise refuse("port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise refuse("scheme")
    if parts.username or parts.password:
        raise refuse("credentials")
    return parts


class HttpsClient:
    """One management device's API over HTTPS; see the module's docstring for what a subclass gives."""

    DEVICE = "device"
    API = "management"
    ADDRESS_SETTING = HTTP_REASON_SETTING = CA_SETTING = ""
    # (name, value) pairs every request carries (a tuple: a class attribute is shared, not copied)
    HEADERS = (("Accept", "application/json"),)
    FOLLOW_REDIRECTS = "none"
    # The end of the deadline and too_large messages: what the operator is told to look at.
    SLOW_ADVICE = ""
    TOO_LARGE_NOTE = ""
    where = "device"

    def __init__(
        self,
        baseuri,
        username,
        password,
        validate_certs=True,
        ca_path=None,
        timeout=10,
        max_body=MAX_BODY,
        retries=3,
        retry_delay=1.0,
        use_proxy=False,
        opener=open_url,
        sleep=time.sleep,
        insecure_http_reason=None,
    ):
        """``baseuri`` normalised (scheme://host[:port]); ``opener`` is open_url's signature and
        ``sleep`` time.sleep's, both replaceable (tests)."""
        self.baseuri = baseuri
        self._username = username
        self._password = password
        # Before anything is sent: no password over plain HTTP without a reason on the record, and a
        # CA file that is named must be one (a local error, said as such, never retried).
        try:
            self.transport_hint = require_tls(
                baseuri, self.DEVICE, self.ADDRESS_SETTING, self.HTTP_REASON_SETTING, insecure_http_reason
            )
            if ca_path:
                check_ca_file(ca_path, self.DEVICE, self.CA_SETTING)
        except TransportConfigError as exc:
            raise self._config_error(exc) from None
        self.validate_certs = validate_certs
        self.ca_path = ca_path
        self.timeout = timeout
        self.max_body = int(max_body)
        self.retries = max(int(retries), 0)
        self.retry_delay = float(retry_delay)
        self.use_proxy = use_proxy
        self._open = opener
        self._sleep = sleep
        self.requests = 0
        self.retried = 0

    def _error(self, kind, message, status=None):
        raise NotImplementedError

    def _config_error(self, exc):
        return self._error("config", str(exc))

    def _options(self, method, body, deadline, basic_auth):
        """open_url's arguments for one request (``body`` a JSON value or None)."""
        options = request_options(
            method,
            self.HEADERS,
            body,
            deadline,
            self.validate_certs,
            self.ca_path,
            self.use_proxy,
            self.FOLLOW_REDIRECTS,
        )
        if basic_auth:
            options.update(url_username=self._username, url_password=self._password, force_basic_auth=True)
        return options

    def _send(self, method, url, shown, options, deadline, retry=True):
        """One request (``shown`` is how messages name it), tried again ``retries`` times when
        ``retry``; returns transport_security's Answer or raises the client's error."""
        attempts = 1 + (self.retries if retry else 0)
        attempt = 0
        while True:
            attempt += 1
            self.requests += 1
            delay = self.retry_delay * (2 ** (attempt - 1))
            try:
                return bounded_request(self._open, url, options, deadline, self.max_body)
            except DeadlineExceeded:
                raise self._error(
                    "deadline",
                    "%s did not answer %s %s in full within %ss (the deadline of one request: connect, "
                    "send and the whole answer; option timeout); a %s this slow is not read%s"
                    % (self.where, method, shown, seconds(deadline), self.DEVICE, self.SLOW_ADVICE),
                ) from None
            except BodyTooLarge as exc:
                raise self._error(
                    "too_large",
                    "%s answered %s %s with more than %s, the most one %s answer may hold%s"
                    % (self.where, method, shown, size(exc.limit), self.API, self.TOO_LARGE_NOTE),
                ) from None
            except HTTPError as exc:
                err = self._http_error(exc, method, shown)
                if exc.code not in RETRY_STATUS or attempt >= attempts or not self._worth_retrying(err):
                    raise err from None
                delay = self._retry_after(exc, delay)
            except (URLError, OSError, http.client.HTTPException, UrlsConnectionError) as exc:
                err = self._connection_error(exc, method, shown, attempt - 1)
                if err.kind == "tls" or attempt >= attempts:
                    raise err from None
            self.retried += 1
            self._sleep(delay)

    def _worth_retrying(self, err):
        """Whether ``err`` (``_http_error``'s, for a status worth another try) is: the device's answer
        may say that waiting a few seconds will not change it (a Redfish BMC's full session limit)."""
        return True

    @staticmethod
    def _retry_after(exc, delay):
        """How long to wait before the next try after ``exc`` (HTTPError); the backoff ``delay`` here."""
        return delay

    def _http_error(self, exc, method, shown):
        raise NotImplementedError

    def _connection_error(self, exc, method, shown, retried):
        kind, detail = transport_failure(exc, self.timeout)
        if kind == "untrusted":
            return self._error("tls", self._untrusted_message(detail))
        if kind == "tls":
            return self._error("tls", "TLS handshake with %s failed (%s)" % (self.where, detail))
        return self._error("connection", self._unreachable_message(detail, method, shown, retried))

    def _untrusted_message(self, detail):
        raise NotImplementedError

    def _unreachable_message(self, detail, method, shown, retried):
        raise NotImplementedError

    def _json(self, raw, method, shown):
        """The answer's JSON value, None when it is empty."""
        if not raw:
            return None
        return decode_json(raw, "%s answered %s %s" % (self.where, method, shown), self._error)
