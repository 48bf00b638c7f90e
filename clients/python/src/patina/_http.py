"""The HTTP transport: one http.client connection per call (the sidecar is
on the loopback: a connection costs little, and streams need their own)."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import secrets
import socket
import urllib.parse
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

from .errors import NotSidecarError, PatinaConnectionError, PatinaError, error_for

# Bounds what an error answer may hold (the sidecar's are small).
_MAX_ERROR_BODY = 1 << 20


def quote(segment: str) -> str:
    """Escapes one path segment."""
    return urllib.parse.quote(str(segment), safe="")


def quote_path(path: str) -> str:
    """Escapes a file path segment by segment (its "/" stay)."""
    return "/".join(quote(p) for p in str(path).lstrip("/").split("/"))


class Transport:
    """Sends requests to a sidecar at ``base_url`` with a bearer token."""

    def __init__(self, base_url: str, token: str, timeout: Optional[float]) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https"):
            raise ValueError("patina: the sidecar's URL must be http:// or https://, got %r" % base_url)
        self.base_url = base_url
        self.scheme = u.scheme
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._verified = False

    def headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        h = {"User-Agent": "patina-client-python"}
        if self.token:
            self.verify()
            h["Authorization"] = "Bearer " + self.token
        if extra:
            h.update(extra)
        return h

    def verify(self) -> None:
        """Makes the server prove it holds the token before the token is
        sent to it (once): ``GET /v1/identify?nonce=N`` answers the hex
        HMAC-SHA256 of ``"patina identify v1 " + N`` keyed with the token.
        After a sidecar dies, another program may listen on its port; it
        gets nothing. Raises ``NotSidecarError``."""
        if self._verified:
            return
        nonce = secrets.token_hex(16)
        conn = self._connection(self.timeout if self.timeout is not None else 30.0)
        try:
            conn.request("GET", self.prefix + "/v1/identify?nonce=" + nonce, headers={"User-Agent": "patina-client-python"})
            resp = conn.getresponse()
            status, raw = resp.status, resp.read(4096)
        except (ConnectionError, socket.gaierror, socket.timeout, OSError) as e:
            raise PatinaConnectionError(
                "cannot reach the patina sidecar at %s: %s (is `patina serve` running? "
                "its address comes from PATINA_ADDR or <state-dir>/sidecar.json)" % (self.base_url, e)
            ) from e
        finally:
            conn.close()
        want = hmac.new(self.token.encode("utf-8"), ("patina identify v1 " + nonce).encode("ascii"), hashlib.sha256).hexdigest()
        try:
            proof = str(json.loads(raw.decode("utf-8")).get("proof", ""))
        except (ValueError, AttributeError):
            proof = ""
        if status != 200 or not hmac.compare_digest(proof, want):
            raise NotSidecarError(
                "the server at %s could not prove it holds the token, so the token was not sent: the token is "
                "not that sidecar's, or another program listens there (is `patina serve` running?)" % self.base_url
            )
        self._verified = True

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def open(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        json_body: Any = None,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Any = "default",
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends a request and returns its connection and a 2xx response
        (the caller reads and closes both); an error answer is raised as the
        exception of its code."""
        if timeout == "default":
            timeout = self.timeout
        url = self.prefix + path
        if query:
            q = {k: ("1" if v is True else v) for k, v in query.items() if v is not None and v is not False}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        h = self.headers(headers)
        data = body
        if json_body is not None:
            data = json.dumps(json_body).encode("utf-8")
            h["Content-Type"] = "application/json"
        elif body is not None:
            h["Content-Type"] = content_type or "application/octet-stream"
        conn = self._connection(timeout)
        try:
            conn.request(method, url, body=data, headers=h)
            resp = conn.getresponse()
        except (ConnectionError, socket.gaierror, socket.timeout, OSError) as e:
            conn.close()
            raise PatinaConnectionError(
                "cannot reach the patina sidecar at %s: %s (is `patina serve` running? "
                "its address comes from PATINA_ADDR or <state-dir>/sidecar.json)" % (self.base_url, e)
            ) from e
        if 200 <= resp.status < 300:
            return conn, resp
        try:
            raw = resp.read(_MAX_ERROR_BODY)
        finally:
            conn.close()
        raise error_from(resp.status, raw)

    def call(self, method: str, path: str, **kw: Any) -> Any:
        """Sends a request and returns its JSON answer (None when it has none)."""
        conn, resp = self.open(method, path, **kw)
        try:
            raw = resp.read()
        finally:
            conn.close()
        if not raw:
            return None
        if resp.getheader("Content-Type", "").startswith("application/json"):
            return json.loads(raw.decode("utf-8"))
        return raw

    def stream(self, method: str, path: str, **kw: Any) -> Iterator[bytes]:
        """Sends a request and yields its body's chunks as they arrive."""
        kw.setdefault("timeout", None)
        conn, resp = self.open(method, path, **kw)
        try:
            while True:
                chunk = resp.read1(64 << 10) if hasattr(resp, "read1") else resp.read(64 << 10)
                if not chunk:
                    return
                yield chunk
        finally:
            conn.close()


# The code of a status that has one only (an answer without a body: HEAD).
_STATUS_CODES = {400: "invalid", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
                 413: "too_large", 422: "rejected", 500: "internal"}


def error_from(status: int, raw: bytes) -> PatinaError:
    try:
        body = json.loads(raw.decode("utf-8"))
        return error_for(status, str(body.get("code", "")), str(body.get("error", "")))
    except (ValueError, AttributeError):
        text = raw.decode("utf-8", "replace").strip() or "HTTP %d" % status
        return error_for(status, _STATUS_CODES.get(status, ""), text)
