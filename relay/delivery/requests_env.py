"""What requests looks up in the environment on every request, looked up once per process.

For each request, requests scans the whole environment twice for proxy settings (urllib's
getproxies_environment) and looks for a ~/.netrc file; on a worker that was a quarter of a send's
CPU (more where a file-system look-up is slow, as in sandboxed containers). The environment and home
directory of a running worker do not change, so the same answers come from one look-up at start:
HTTP(S)_PROXY and NO_PROXY are honoured as before, and a .netrc (or $NETRC) present at the first send
is read as before.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from collections.abc import Mapping
from functools import cache
from typing import Any

import requests.sessions
import requests.utils

_original_netrc_auth = requests.utils.get_netrc_auth


@cache
def _environment() -> dict[str, str]:
    return urllib.request.getproxies_environment()


def _getproxies() -> dict[str, str]:
    return dict(_environment())


def _proxy_bypass(host: str, proxies: Mapping[str, str] | None = None) -> bool:
    found = urllib.request.proxy_bypass_environment(host, proxies or _environment())  # type: ignore[attr-defined]
    return bool(found)


@cache
def _netrc_present() -> bool:
    named = os.environ.get("NETRC")
    places = [named] if named is not None else [f"~/{name}" for name in requests.utils.NETRC_FILES]
    return any(os.path.exists(os.path.expanduser(place)) for place in places)


def _netrc_auth(url: Any, raise_errors: bool = False) -> tuple[str, str] | None:
    return _original_netrc_auth(url, raise_errors) if _netrc_present() else None


def read_once() -> None:
    """Make requests use the environment as it was at the first send. Proxies only where urllib itself
    reads them from the environment (not macOS or Windows, which have registries)."""
    requests.sessions.get_netrc_auth = _netrc_auth  # type: ignore[attr-defined]
    if os.name != "posix" or sys.platform == "darwin":
        return
    requests.utils.getproxies = _getproxies  # type: ignore[attr-defined]
    requests.utils.proxy_bypass = _proxy_bypass  # type: ignore[attr-defined]
