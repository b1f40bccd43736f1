"""Keep-alive HTTP connections for Apprise's sends: one requests Session per thread.

Apprise's plugins call `requests.post(...)` and friends, each of which builds a Session, opens a
connection (a TLS handshake, for a chat API) and closes it again. Inside `pooled()`, those calls go
to a Session of the calling thread instead, whose connections to a host stay open for the next send,
as any production HTTP client's would. Outside it (the catalog client, anything else) requests is
untouched. Cookies never outlive one send. A connection the server closed meanwhile is opened again
by urllib3; one closed while a request is on it fails that send, which is retried like any network
failure.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from requests.utils import DEFAULT_CA_BUNDLE_PATH

from relay.delivery.thread_scope import scoped

_local = threading.local()


@lru_cache(maxsize=64)
def _is_dir(path: str) -> bool:
    return os.path.isdir(path)


@lru_cache(maxsize=64)
def _exists(path: str) -> bool:
    return os.path.exists(path)


class _Adapter(HTTPAdapter):
    """requests' adapter, asking the file system about a CA bundle path (REQUESTS_CA_BUNDLE, say) once,
    not on every request: a look-up is slow on some file systems, and the bundle does not move."""

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        if not isinstance(verify, str):
            return super().build_connection_pool_key_attributes(request, verify, cert)
        host, pool = super().build_connection_pool_key_attributes(request, True, cert)
        pool["ca_cert_dir" if _is_dir(verify) else "ca_certs"] = verify
        return host, pool

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        bundle = verify if isinstance(verify, str) else DEFAULT_CA_BUNDLE_PATH if verify is True else None
        if bundle and not cert and url.lower().startswith("https") and _exists(bundle):
            # What HTTPAdapter.cert_verify does for a bundle that exists, minus the look-ups.
            conn.cert_reqs = "CERT_REQUIRED"
            conn.ca_certs, conn.ca_cert_dir = (None, bundle) if _is_dir(bundle) else (bundle, None)
            return
        super().cert_verify(conn, url, verify, cert)


def _session() -> requests.Session:
    session: requests.Session | None = getattr(_local, "session", None)
    if session is None:
        session = _local.session = requests.Session()
        session.mount("https://", _Adapter())
        session.mount("http://", _Adapter())
    return session


def _request(method: str, url: str, **kwargs: Any) -> requests.Response:
    return _session().request(method=method, url=url, **kwargs)


# The functions of requests.api, in their own signatures and defaults, on the thread's Session.
def _get(url: str, params: Any = None, **kwargs: Any) -> requests.Response:
    return _request("get", url, params=params, **kwargs)


def _options(url: str, **kwargs: Any) -> requests.Response:
    return _request("options", url, **kwargs)


def _head(url: str, **kwargs: Any) -> requests.Response:
    kwargs.setdefault("allow_redirects", False)
    return _request("head", url, **kwargs)


def _post(url: str, data: Any = None, json: Any = None, **kwargs: Any) -> requests.Response:
    return _request("post", url, data=data, json=json, **kwargs)


def _put(url: str, data: Any = None, **kwargs: Any) -> requests.Response:
    return _request("put", url, data=data, **kwargs)


def _patch(url: str, data: Any = None, **kwargs: Any) -> requests.Response:
    return _request("patch", url, data=data, **kwargs)


def _delete(url: str, **kwargs: Any) -> requests.Response:
    return _request("delete", url, **kwargs)


_POOLED = {
    "request": _request,
    "get": _get,
    "options": _options,
    "head": _head,
    "post": _post,
    "put": _put,
    "patch": _patch,
    "delete": _delete,
}


def _install() -> None:
    for name, pooled_call in _POOLED.items():
        original = getattr(requests, name)

        def call(*args: Any, _pooled: Any = pooled_call, _original: Any = original, **kwargs: Any) -> Any:
            return (_pooled if getattr(_local, "active", False) else _original)(*args, **kwargs)

        setattr(requests, name, call)


@contextmanager
def pooled() -> Iterator[None]:
    """requests' module-level calls made by this thread inside the block use its kept connections."""
    _session().cookies.clear()
    with scoped(_local, "active", True):
        yield


_install()  # once, as the module is first imported (under Python's import lock)
