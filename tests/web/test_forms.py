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


TOO_MANY = "&".join(f"f{i}=x" for i in range(25))


@pytest.mark.parametrize("path", ["/ui/login", "/ui/logout", "/ui/silences", "/ui/replay", "/ui/release"])
def test_a_form_of_too_many_fields_is_a_400_of_the_convention_and_one_line_at_most(
    rt: Runtime, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Any console form with more than 20 fields, before any login (or with the admin API's header, which the
    buttons' forms take): a 4xx with the error body, not a 500 and a traceback."""
    form = {"content-type": "application/x-www-form-urlencoded", "authorization": f"Bearer {ADMIN_TOKEN}"}
    with TestClient(create_app(rt), raise_server_exceptions=False) as client:
        answer = client.post(path, content=TOO_MANY, headers=form, follow_redirects=False)
    assert answer.status_code == 400, answer.text
    assert answer.json()["errors"][0].startswith("the form cannot be read: Too many fields")
    assert not [r for r in caplog.records if r.exc_info], "no traceback logged"


def test_the_people_pages_read_multipart_by_its_boundary_and_refuse_files(rt: Runtime) -> None:
    """RFC 8058's one-click POST, multipart as some mail providers send it, is read by its boundary (a value
    that holds the boundary's look-alike is still one value); a file part is refused."""
    import asyncio

    from starlette.requests import Request

    from relay.web.forms import FormRefused, read_form

    def request(body: bytes, boundary: str = "b0undary") -> Request:
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            more, sent = not sent, True
            return {"type": "http.request", "body": body if more else b"", "more_body": False}

        headers = [(b"content-type", f"multipart/form-data; boundary={boundary}".encode())]
        return Request({"type": "http", "method": "POST", "headers": headers}, receive)

    one_click = (
        b'--b0undary\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\nOne-Click\r\n'
        b'--b0undary\r\nContent-Disposition: form-data; name="note"\r\n\r\nline\r\n--b0undar\r\n--b0undary--\r\n'
    )
    fields = asyncio.run(read_form(request(one_click), max_fields=20))
    assert fields == [("List-Unsubscribe", "One-Click"), ("note", "line\r\n--b0undar")]
    a_file = b'--b0undary\r\nContent-Disposition: form-data; name="f"; filename="x.txt"\r\n\r\ndata\r\n--b0undary--\r\n'
    with pytest.raises(FormRefused) as refused:
        asyncio.run(read_form(request(a_file), max_fields=20))
    assert refused.value.response.status_code == 400
