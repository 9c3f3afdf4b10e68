"""One HTTP request to a ``bexdb serve`` on loopback, as the service tests make them."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit


def call(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
    """One request; the answer's status, decoded body (JSON, else text) and headers."""
    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    conn.request(method, path, body=data)
    resp = conn.getresponse()
    raw = resp.read()
    headers = dict(resp.getheaders())
    conn.close()
    if headers.get("Content-Type", "").startswith("application/json") and raw:
        return resp.status, json.loads(raw), headers
    return resp.status, raw.decode(), headers


def request(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """:func:`call` without the headers, an empty body as None."""
    status, doc, _ = call(url, method, path, body)
    return status, None if doc == "" else doc
