# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet's one HTTP client for a vLLM instance (OpenAI-compatible server), on Ansible's urls.Request.

service_check (health, model list, /metrics) and burn_in (model list, completions under load) both
talk to the instance through it: the same TLS verification, timeouts, no proxy, no netrc, and the
same error text for the operator. No call raises for HTTP or connection trouble: each returns
``(status, text)``, status None when no HTTP answer came (text then says why).

Runs on the managed node (Python 3.11); thread-safe (one request per call). The TLS context is built
once per client: open_url builds one per request, loading every CA certificate of the system each
time (tens of ms of CPU), which the burn-in's back-to-back completions turned into most of a core.
"""

from __future__ import annotations

import json
import threading
from http.cookiejar import CookieJar
from urllib.error import HTTPError, URLError

from ansible.module_utils.urls import Request, make_context


def model_ids(text):
    """The ids of a ``/v1/models`` answer (empty when there are none or it is not that JSON)."""
    try:
        data = json.loads(text).get("data") or []
    except (ValueError, AttributeError):
        return []
    return [m.get("id") for m in data if isinstance(m, dict) and m.get("id")]


class VllmClient:
    """One instance at ``base`` (``http://127.0.0.1:8000``)."""

    def __init__(self, base, timeout=10, validate_certs=True):
        self.base = base.rstrip("/")
        self.timeout = timeout
        self.validate_certs = validate_certs
        self._request = None
        self._lock = threading.Lock()

    def _opener(self):
        """One Request (its TLS context with it) for every call of this client."""
        with self._lock:
            if self._request is None:
                self._request = Request(
                    timeout=self.timeout,
                    validate_certs=self.validate_certs,
                    use_proxy=False,
                    use_netrc=False,
                    context=make_context(validate_certs=self.validate_certs),
                )
            return self._request

    def _call(self, path, method="GET", body=None):
        headers = {"Content-Type": "application/json"} if body is not None else None
        data = json.dumps(body).encode("utf-8") if body is not None else None
        try:
            # A new cookie jar per call: nothing one answer sets is sent with the next.
            opener = self._opener()
            resp = opener.open(method, self.base + path, data=data, headers=headers, cookies=CookieJar())
            return resp.status, resp.read().decode("utf-8", "replace")
        except HTTPError as exc:
            return exc.code, "HTTP %d" % exc.code
        except (URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return None, str(getattr(reason, "strerror", None) or reason) or type(exc).__name__

    def get(self, path):
        """(status, text) of GET ``path``."""
        return self._call(path)

    def post_json(self, path, body):
        """(status, text) of POST ``path`` with a JSON body."""
        return self._call(path, method="POST", body=body)

    def models(self):
        """(status, ids, text) of ``/v1/models``; ids empty unless status is 200."""
        status, text = self.get("/v1/models")
        return status, model_ids(text) if status == 200 else [], text
