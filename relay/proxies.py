"""The environment's HTTP proxy settings, read once per process instead of on every send.

requests honours HTTP(S)_PROXY and NO_PROXY by scanning the whole environment twice per request
(urllib's getproxies_environment); on a worker that is a sixth of a send's CPU. The environment of
a running process does not change, so the same answers come from one read at start.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from collections.abc import Mapping
from functools import cache

import requests.utils


@cache
def _environment() -> dict[str, str]:
    return urllib.request.getproxies_environment()


def _getproxies() -> dict[str, str]:
    return dict(_environment())


def _proxy_bypass(host: str, proxies: Mapping[str, str] | None = None) -> bool:
    found = urllib.request.proxy_bypass_environment(host, proxies or _environment())  # type: ignore[attr-defined]
    return bool(found)


def read_once() -> None:
    """Make requests use the proxy settings as the environment had them at the first send (only where
    urllib itself reads them from the environment: not on macOS or Windows, which have registries)."""
    if os.name != "posix" or sys.platform == "darwin":
        return
    requests.utils.getproxies = _getproxies  # type: ignore[attr-defined]
    requests.utils.proxy_bypass = _proxy_bypass  # type: ignore[attr-defined]
