"""Refused credentials, slowed (relay/web/throttle.py), on each surface through the app on a real Redis:
the nth refusal throttled before any credential is looked at, a client that has not failed never slowed,
the window passing (an injected clock), two API processes sharing one count, the client behind a trusted
proxy, what the log and the metrics say."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from starlette.requests import Request
from starlette.responses import Response
from starlette.testclient import TestClient

from relay.config import ServerConfig
from relay.core.clock import system_clock
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.web.throttle import Guard, client_address, counted_as
from tests.clock import ManualClock
from tests.conftest import ADMIN_TOKEN, WEBHOOK_TOKEN, sample_notification
from tests.intake.test_http import assert_error_body

LIMIT = 3
WINDOW = 60.0
CLIENT = "203.0.113.7"
OTHER = "203.0.113.8"
WRONG = "wrong-token-of-a-guesser-0042"


def server(**extra: Any) -> dict[str, Any]:
    return {
        "auth": {"tokens": [WEBHOOK_TOKEN]},
        "admin_tokens": [ADMIN_TOKEN],
        "auth_failures": {"limit": LIMIT, "window": "1m"},
        **extra,
    }


@pytest.fixture
def clock() -> ManualClock:
    """The time the guard measures windows by (the runtime's one clock), moved by the test."""
    return ManualClock(system_clock())


@pytest.fixture
def guarded(make_runtime: Callable[..., Runtime], clock: ManualClock) -> Runtime:
    return make_runtime(server=server(), clock=clock)


@pytest.fixture
def connect(guarded: Runtime) -> Iterator[Callable[..., TestClient]]:
    """TestClients of the guarded app, each from the address given (the TCP peer the app sees)."""
    opened: list[TestClient] = []

    def make(address: str = CLIENT, rt: Runtime | None = None) -> TestClient:
        client = TestClient(create_app(rt or guarded), client=(address, 50000), follow_redirects=False)
        opened.append(client.__enter__())
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


@dataclass(frozen=True)
class Surface:
    """One authenticated surface: its `endpoint` label, a call with a wrong credential and with the right one,
    and what each answers when not throttled."""

    name: str
    wrong: Callable[[TestClient], Any]
    right: Callable[[TestClient], Any]
    refused: int
    accepted: int


def _webhook(token: str) -> Callable[[TestClient], Any]:
    return lambda c: c.post("/webhook", json=sample_notification(), headers={"Authorization": f"Bearer {token}"})


def _api(token: str) -> Callable[[TestClient], Any]:
    return lambda c: c.get("/api/v1/deliveries", headers={"Authorization": f"Bearer {token}"})


def _login(token: str) -> Callable[[TestClient], Any]:
    return lambda c: c.post("/ui/login", data={"token": token})


SURFACES = [
    Surface("webhook", _webhook(WRONG), _webhook(WEBHOOK_TOKEN), 401, 202),
    Surface("api", _api(WRONG), _api(ADMIN_TOKEN), 401, 200),
    Surface("ui", _login(WRONG), _login(ADMIN_TOKEN), 401, 303),
]
each_surface = pytest.mark.parametrize("surface", SURFACES, ids=[s.name for s in SURFACES])


def metric(client: TestClient, sample: str) -> float:
    """One sample of /metrics, e.g. `relay_auth_failures_total{endpoint="api"}` (absent: 0)."""
    for line in client.get("/metrics").text.splitlines():
        name, _, value = line.rpartition(" ")
        if name == sample:
            return float(value)
    return 0.0


def throttle(client: TestClient, surface: Surface) -> None:
    for _ in range(LIMIT):
        assert surface.wrong(client).status_code == surface.refused


@each_surface
def test_the_call_after_the_limit_is_answered_429_whatever_its_credential(
    connect: Callable[..., TestClient], surface: Surface
) -> None:
    client = connect()
    throttle(client, surface)

    answer = surface.wrong(client)
    body = assert_error_body(answer, 429)
    assert answer.headers["Retry-After"] == "60"
    assert "try again in 60 s" in body["errors"][0]
    # Answered before the credential is looked at: a right guess now would otherwise show.
    right = surface.right(client)
    assert right.status_code == 429 and right.headers["Retry-After"] == "60"

    assert metric(client, f'relay_auth_failures_total{{endpoint="{surface.name}"}}') == LIMIT
    assert metric(client, "relay_auth_throttled_total") == 2


def test_a_throttled_webhook_call_stores_nothing(connect: Callable[..., TestClient], guarded: Runtime) -> None:
    client = connect()
    throttle(client, SURFACES[0])
    payload = sample_notification()
    answer = client.post("/webhook", json=payload, headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"})
    assert answer.status_code == 429
    assert guarded.store.event(payload["metadata"]["eventId"]) is None


@each_surface
def test_a_client_that_has_not_failed_is_never_slowed(connect: Callable[..., TestClient], surface: Surface) -> None:
    guesser, honest = connect(CLIENT), connect(OTHER)
    throttle(guesser, surface)
    assert surface.wrong(guesser).status_code == 429
    for _ in range(3 * LIMIT):
        assert surface.right(honest).status_code == surface.accepted
    # Nor is the guesser on another surface: each counts its own.
    other = next(s for s in SURFACES if s.name != surface.name)
    assert other.right(guesser).status_code == other.accepted
    # And a client that only ever sends the right credential never costs a count.
    assert metric(honest, "relay_auth_throttled_total") == 1


@each_surface
def test_throttling_ends_when_the_window_lets_go_of_the_refusals(
    connect: Callable[..., TestClient], surface: Surface, clock: ManualClock
) -> None:
    client = connect()
    throttle(client, surface)
    clock.advance(WINDOW / 2)
    answer = surface.right(client)
    assert answer.status_code == 429 and answer.headers["Retry-After"] == "30"

    clock.advance(WINDOW / 2)
    assert surface.right(client).status_code == surface.accepted
    # The window is empty again: the next wrong credential is a first refusal, not a 429.
    assert surface.wrong(client).status_code == surface.refused


def test_the_window_slides(connect: Callable[..., TestClient], clock: ManualClock) -> None:
    """Refusals spread over the window: throttled until the oldest leaves it, then one more guess is allowed."""
    client, webhook = connect(), SURFACES[0]
    for _ in range(LIMIT):
        assert webhook.wrong(client).status_code == 401
        clock.advance(20)
    # Refusals at 0, 20 and 40 s; now 60 s: the first has just left the window.
    assert webhook.wrong(client).status_code == 401
    answer = webhook.wrong(client)
    assert answer.status_code == 429 and answer.headers["Retry-After"] == "20"


@each_surface
def test_two_api_processes_share_one_count(
    connect: Callable[..., TestClient], make_runtime: Callable[..., Runtime], clock: ManualClock, surface: Surface
) -> None:
    """Two apps, each with its own runtime and Redis clients, on the one Redis: every replica sees the same."""
    second = make_runtime(server=server(), clock=clock)
    one, two = connect(CLIENT), connect(CLIENT, second)
    assert surface.wrong(one).status_code == surface.refused
    assert surface.wrong(two).status_code == surface.refused
    assert surface.wrong(one).status_code == surface.refused
    assert surface.right(two).status_code == 429
    assert surface.right(one).status_code == 429


def test_admin_tokens_tried_on_the_admin_page_count_with_the_api(connect: Callable[..., TestClient]) -> None:
    """The admin page takes the API's header too: guessing there is guessing the API's token."""
    client = connect()
    for _ in range(LIMIT):
        answer = client.get("/ui", headers={"Authorization": f"Bearer {WRONG}"})
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/login"
    assert assert_error_body(client.get("/ui", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}), 429)
    assert _api(ADMIN_TOKEN)(client).status_code == 429
    # Logging in with the form is another surface, and a session is no guess.
    assert _login(ADMIN_TOKEN)(client).status_code == 303
    assert client.get("/ui").status_code == 200


def test_a_browser_is_answered_a_page(connect: Callable[..., TestClient]) -> None:
    client = connect()
    throttle(client, SURFACES[2])
    answer = client.post("/ui/login", data={"token": ADMIN_TOKEN}, headers={"Accept": "text/html,*/*;q=0.8"})
    assert answer.status_code == 429 and answer.headers["Retry-After"] == "60"
    assert answer.headers["content-type"].startswith("text/html")
    assert "Wait 60 seconds" in answer.text


def test_a_signature_that_does_not_verify_is_a_refused_credential(
    make_runtime: Callable[..., Runtime], connect: Callable[..., TestClient]
) -> None:
    signed = make_runtime(server=server(auth={"hmac": {"secret": "s" * 32}}))
    client = connect(CLIENT, signed)
    headers = {"X-Relay-Signature": "sha256=" + "0" * 64, "X-Relay-Timestamp": str(int(signed.clock()))}
    for _ in range(LIMIT):
        assert client.post("/webhook", json=sample_notification(), headers=headers).status_code == 401
    assert client.post("/webhook", json=sample_notification(), headers=headers).status_code == 429


def test_the_log_says_it_once_per_client_and_window_never_the_credential(
    connect: Callable[..., TestClient], clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    client = connect()
    with caplog.at_level(logging.INFO):
        for _ in range(4 * LIMIT):
            _api(WRONG)(client)
        clock.advance(WINDOW)
        _api(WRONG)(client)
    lines = [r.getMessage() for r in caplog.records if r.name == "relay.web.throttle"]
    assert len(lines) == 3, lines
    assert lines[0].startswith(f"api: refused credentials from {CLIENT} (no valid admin token)")
    assert lines[1] == f"api: {CLIENT} refused {LIMIT} times within 60 s: answered 429 until they leave the window"
    assert lines[2].startswith(f"api: refused credentials from {CLIENT}")
    assert not [r for r in caplog.records if WRONG in r.getMessage()]


def test_behind_a_trusted_proxy_each_client_is_counted_apart(
    make_runtime: Callable[..., Runtime], connect: Callable[..., TestClient]
) -> None:
    proxied = make_runtime(server=server(trusted_proxies=["10.0.0.0/8"]))
    proxy = connect("10.1.2.3", proxied)
    api = SURFACES[1]
    for _ in range(LIMIT):
        answer = proxy.get("/api/v1/deliveries", headers={"Authorization": "Bearer x", "X-Forwarded-For": CLIENT})
        assert answer.status_code == 401
    behind = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert proxy.get("/api/v1/deliveries", headers={**behind, "X-Forwarded-For": CLIENT}).status_code == 429
    assert proxy.get("/api/v1/deliveries", headers={**behind, "X-Forwarded-For": OTHER}).status_code == 200
    # From a peer that is not a trusted proxy, the header names nobody: the peer is the client.
    direct = connect(OTHER, proxied)
    throttle(direct, api)
    spoofed = direct.get("/api/v1/deliveries", headers={**behind, "X-Forwarded-For": "198.51.100.99"})
    assert spoofed.status_code == 429


def _request(peer: str, forwarded: list[str]) -> Request:
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers, "client": (peer, 1)})


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("198.51.100.1", ["203.0.113.7"], "198.51.100.1"),  # not a proxy of ours: the header is ignored
        ("10.0.0.1", [], "10.0.0.1"),
        ("10.0.0.1", ["203.0.113.7"], "203.0.113.7"),
        ("10.0.0.1", ["1.1.1.1, 203.0.113.7"], "203.0.113.7"),  # the left part is the client's own say
        ("10.0.0.1", ["1.1.1.1, 203.0.113.7, 10.0.0.9"], "203.0.113.7"),  # two proxies of ours
        ("10.0.0.1", ["1.1.1.1", "203.0.113.7"], "203.0.113.7"),  # the header repeated
        ("10.0.0.1", ["10.0.0.7, 10.0.0.8"], "10.0.0.7"),  # all ours: the first
        ("10.0.0.1", ["garbage, 203.0.113.7:4711"], "203.0.113.7"),
        ("10.0.0.1", ["203.0.113.7, garbage"], "10.0.0.1"),  # a proxy of ours passed garbage: stop at it
        ("10.0.0.1", ["[2001:db8::1]:443"], "2001:db8::1"),
    ],
)
def test_client_address(peer: str, forwarded: list[str], client: str) -> None:
    trusted = ServerConfig(trusted_proxies=["10.0.0.0/8"]).trusted_networks()
    assert client_address(_request(peer, forwarded), trusted) == client


def test_counted_as() -> None:
    assert counted_as("203.0.113.7") == "203.0.113.7"
    # One host usually holds a whole /64: its addresses are one client.
    assert counted_as("2001:db8:1:2:aaaa::1") == counted_as("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"
    assert counted_as("::ffff:203.0.113.7") == "203.0.113.7"
    assert counted_as("testclient") == "testclient" and counted_as("") == "unknown"


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    assert ServerConfig(trusted_proxies=[" 10.0.0.1 ", "10.1.0.0/16", "fd00::/8"]).trusted_proxies[0] == "10.0.0.1"
    with pytest.raises(ValueError, match=re.escape("'proxy.local' is not an IP address or a CIDR network")):
        ServerConfig(trusted_proxies=["proxy.local"])


def test_redis_unavailable_throttles_nobody(caplog: pytest.LogCaptureFixture) -> None:
    """The credential check still holds; only the counting is lost (and said)."""
    config = ServerConfig(auth_failures={"limit": 1, "window": 60})  # type: ignore[arg-type]

    def down() -> AsyncRedis:
        # No retries of redis-py's own (its default backs off for seconds): the guard's answer to the error is tested.
        return AsyncRedis(host="127.0.0.1", port=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))

    guard = Guard(down, lambda: config, system_clock)

    async def run() -> Response | None:
        request = _request(CLIENT, [])
        await guard.failed(request, "api")
        await guard.failed(request, "api")
        return await guard.check(request, "api")

    with caplog.at_level(logging.WARNING):
        assert asyncio.run(run()) is None
    # Said once, not at every call a client can make.
    assert [r.getMessage()[:40] for r in caplog.records] == ["api: refused credentials from 203.0.113."]
    assert "not counted: Redis" in caplog.text


# --- the preference and unsubscribe links --------------------------------------------------------


def test_invalid_preference_links_are_throttled_and_an_expired_one_is_not_counted(
    make_runtime: Callable[..., Runtime], clock: ManualClock
) -> None:
    """A guesser of links gets 429 after the limit, its right link too; an expired link (people click old
    mail) is not counted; another address is never slowed."""
    from relay.web.links import SCOPE_PREFERENCES, SCOPE_UNSUBSCRIBE, Link, make_token

    secret = "s" * 40
    rt = make_runtime(
        server=server(),
        preferences={"public_url": "https://relay.example.com", "secret": secret, "link_ttl": "1d"},
        clock=clock,
    )
    good = make_token(secret, Link("user:default/alice.rossi", SCOPE_PREFERENCES, clock()))
    old = make_token(secret, Link("user:default/alice.rossi", SCOPE_PREFERENCES, clock() - 3 * 86400))
    unsub = make_token(secret, Link("user:default/alice.rossi", SCOPE_UNSUBSCRIBE, clock(), "notification:x", "mail"))
    with (
        TestClient(create_app(rt), client=(CLIENT, 50000)) as guesser,
        TestClient(create_app(rt), client=(OTHER, 50000)) as other,
    ):
        for _ in range(LIMIT + 2):
            assert guesser.get(f"/preferences/{old}").status_code == 410  # expired: not a guess
        assert guesser.get(f"/preferences/{good}").status_code == 200
        for i in range(LIMIT):
            assert guesser.get(f"/preferences/{good[:-2]}x{i}").status_code == 403
        throttled = guesser.get(f"/preferences/{good}")
        assert throttled.status_code == 429 and int(throttled.headers["Retry-After"]) > 0
        assert_error_body(throttled, 429)
        # Another surface keeps its own count; another address is never slowed.
        assert guesser.get(f"/unsubscribe/{unsub}").status_code == 200
        assert other.get(f"/preferences/{good}").status_code == 200
        clock.advance(WINDOW + 1)
        assert guesser.get(f"/preferences/{good}").status_code == 200
        metrics = other.get("/metrics").text
    assert f'relay_auth_failures_total{{endpoint="preferences"}} {float(LIMIT)}' in metrics
