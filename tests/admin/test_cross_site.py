"""The admin API's writes from another site: with no `admin_tokens` (open mode, fine on loopback) a web page the
operator visits could post to it, so every write refuses a body that does not say JSON (415; a form or a
typeless `fetch` or `sendBeacon` cannot send JSON without a preflight), and in open mode a write whose `Origin`
or `Sec-Fetch-Site` says it came from another site (403). Nothing is created, replayed or reloaded then."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import ADMIN_TOKEN, WEBHOOK_TOKEN

EVERYTHING = {"matchers": ['kind=~".*"'], "endsAt": "9999-12-31T23:59:59Z", "action": "skip", "createdBy": "mallory"}
FOR_AN_HOUR = {"matchers": ['kind=~".*"'], "duration": "1h", "createdBy": "ana", "comment": "db move"}
WRITES = [
    ("POST", "/api/v1/silences", EVERYTHING),
    ("POST", "/api/v1/deliveries/replay", {"kind": "notification:x"}),
    ("POST", "/api/v1/deliveries/release", {"kind": "notification:x"}),
    ("POST", "/api/v1/reload", None),
    ("PUT", "/api/v1/people/alice%40example.com/preferences", {"optOuts": []}),
]


@pytest.fixture
def open_api(make_runtime: Callable[..., Runtime]) -> Iterator[TestClient]:
    rt = make_runtime(server={"auth": {"tokens": [WEBHOOK_TOKEN]}, "admin_tokens": []})
    with TestClient(create_app(rt)) as client:
        yield client


def _silences(client: TestClient, **headers: str) -> list[Any]:
    return list(client.get("/api/v1/silences", headers=headers).json()["silences"])


@pytest.mark.parametrize("method,path,body", [w for w in WRITES if w[2] is not None])
def test_a_body_that_does_not_say_json_is_refused_in_open_mode(
    open_api: TestClient, method: str, path: str, body: dict[str, Any]
) -> None:
    for headers in ({}, {"content-type": "text/plain"}, {"content-type": "application/x-www-form-urlencoded"}):
        answer = open_api.request(method, path, content=json.dumps(body), headers=headers)
        assert answer.status_code == 415, (headers, answer.text)
        assert "application/json" in answer.json()["moreInfo"]["solutions"][0]
    assert _silences(open_api) == []


def test_a_typeless_body_is_refused_with_a_token_too(make_runtime: Callable[..., Runtime]) -> None:
    with TestClient(create_app(make_runtime())) as client:
        auth = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        answer = client.post("/api/v1/silences", content=json.dumps(EVERYTHING), headers=auth)
        assert answer.status_code == 415
        assert _silences(client, **auth) == []


@pytest.mark.parametrize("method,path,body", WRITES)
@pytest.mark.parametrize(
    "site", [{"origin": "https://evil.example"}, {"origin": "null"}, {"sec-fetch-site": "cross-site"}]
)
def test_a_write_from_another_site_is_refused_in_open_mode(
    open_api: TestClient, method: str, path: str, body: dict[str, Any] | None, site: dict[str, str]
) -> None:
    headers = {"content-type": "application/json", **site}
    answer = open_api.request(method, path, content=json.dumps(body) if body else None, headers=headers)
    assert answer.status_code == 403, answer.text
    assert answer.json()["userMessage"].startswith("A write from another site")
    assert _silences(open_api) == []


def test_the_same_site_and_a_tool_without_origin_still_write(open_api: TestClient) -> None:
    json_type = {"content-type": "application/json"}
    for site in ({}, {"origin": "http://testserver"}, {"sec-fetch-site": "same-origin"}, {"sec-fetch-site": "none"}):
        body = {**FOR_AN_HOUR, "comment": str(site)}
        answer = open_api.post("/api/v1/silences", content=json.dumps(body), headers={**json_type, **site})
        assert answer.status_code == 201, (site, answer.text)
    assert len(_silences(open_api)) == 4
    assert open_api.post("/api/v1/deliveries/replay", headers=json_type).status_code == 200  # no body: all failed


def test_a_token_holder_may_write_from_another_origin(make_runtime: Callable[..., Runtime]) -> None:
    """A browser sends Authorization across sites only after a preflight the API does not grant: a token on a
    cross-site request is a tool's, which the token vouches for."""
    with TestClient(create_app(make_runtime())) as client:
        headers = {"authorization": f"Bearer {ADMIN_TOKEN}", "origin": "https://tools.example"}
        assert client.post("/api/v1/silences", json=FOR_AN_HOUR, headers=headers).status_code == 201
