"""Where a browser's POST came from: X-Forwarded-Host counts only from a trusted proxy, and the configured
public URL is relay's own too (relay/web/forms.py `same_origin`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import ADMIN_TOKEN, WEBHOOK_TOKEN

PROXIED = {"auth": {"tokens": [WEBHOOK_TOKEN]}, "admin_tokens": [ADMIN_TOKEN], "trusted_proxies": ["10.0.0.0/8"]}


def login(rt: Runtime, peer: str, **headers: str) -> Any:
    with TestClient(create_app(rt), client=(peer, 50000)) as client:
        return client.post("/ui/login", data={"token": ADMIN_TOKEN}, headers=headers, follow_redirects=False)


def test_a_forwarded_host_from_any_client_names_no_origin(rt: Runtime) -> None:
    # A client that names another site in both headers is that site, not this relay.
    answer = login(rt, "testclient", Origin="http://evil.example", **{"X-Forwarded-Host": "evil.example"})
    assert answer.status_code == 403


@pytest.mark.parametrize(("peer", "status"), [("10.1.2.3", 303), ("192.0.2.7", 403)])
def test_a_forwarded_host_counts_from_a_trusted_proxy_only(
    make_runtime: Callable[..., Runtime], peer: str, status: int
) -> None:
    rt = make_runtime(server=PROXIED)
    headers = {"Origin": "https://relay.example.com", "X-Forwarded-Host": "evil.example, relay.example.com"}
    assert login(rt, peer, Host="relay:8080", **headers).status_code == status
    # The value a trusted proxy passed on from its client (the first of a list) is the client's word.
    headers["X-Forwarded-Host"] = "relay.example.com, evil.example"
    assert login(rt, peer, Host="relay:8080", **headers).status_code == 403


def test_the_public_url_is_this_relay_behind_any_proxy(make_runtime: Callable[..., Runtime]) -> None:
    rt = make_runtime(preferences={"public_url": "https://relay.example.com", "secret": "s" * 32})
    assert login(rt, "192.0.2.7", Host="relay:8080", Origin="https://relay.example.com").status_code == 303
    assert login(rt, "192.0.2.7", Host="relay:8080", Origin="https://other.example.com").status_code == 403
