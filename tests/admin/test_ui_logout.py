"""Logging out of the admin page ends the session on the server: a copy of the cookie (captured before the
logout) opens nothing any more, on any API replica sharing the Redis, and after a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from redis import Redis
from starlette.testclient import TestClient

from relay.admin.ui_session import COOKIE, csrf_token, new_session
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build
from relay.storage.sessions import ENDED
from tests.admin.forms import csrf_of
from tests.admin.test_ui import login
from tests.conftest import ADMIN_TOKEN, base_config
from tests.servers import HttpSink, SmtpSink, free_port


def with_cookie(client: TestClient, value: str, path: str = "/ui") -> int:
    # The copy an attacker kept: sent as a header, whatever the client's own cookie jar holds now.
    return client.get(path, headers={"Cookie": f"{COOKIE}={value}"}, follow_redirects=False).status_code


def test_a_captured_cookie_is_refused_after_logout_on_every_replica_and_after_a_restart(
    rt: Runtime, make_runtime: Callable[..., Runtime]
) -> None:
    with TestClient(create_app(rt)) as first, TestClient(create_app(make_runtime())) as second:
        assert login(first).status_code == 303
        captured = first.cookies[COOKIE]
        assert with_cookie(second, captured) == 200  # every replica accepts the session
        answer = first.post("/ui/logout", data={"csrf": csrf_of(first.get("/ui").text)}, follow_redirects=False)
        assert answer.status_code == 303

        assert with_cookie(first, captured) == 303  # to the login form
        assert with_cookie(second, captured) == 303
        refused = second.post("/ui/replay", data={"eventId": "x"}, headers={"Cookie": f"{COOKIE}={captured}"})
        assert refused.status_code == 401
        # A new session of the same browser is a new one, and works.
        assert login(second).status_code == 303 and with_cookie(second, second.cookies[COOKIE]) == 200

    with TestClient(create_app(make_runtime())) as restarted:
        assert with_cookie(restarted, captured) == 303

    [key] = rt.redis.keys(ENDED + "*")
    assert 0 < int(rt.redis.ttl(key)) <= 12 * 3600 + 60  # kept no longer than the cookie would have lived
    assert captured.split(".")[1] not in key.decode()  # the nonce itself is not written down


def test_with_redis_down_a_logout_says_it_did_not_end_the_session(
    sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    # A session made while Redis answered, checked by a replica whose Redis does not answer (nothing listens).
    url = f"redis://127.0.0.1:{free_port()}/0"
    rt = build(base_config(sink, smtp, tmp_path, url), Redis.from_url(url, socket_connect_timeout=1))
    with TestClient(create_app(rt)) as client:
        client.cookies.set(COOKIE, new_session(ADMIN_TOKEN, rt.clock()), path="/ui")
        assert client.get("/ui", follow_redirects=False).status_code == 503
        page = client.post(
            "/ui/logout", data={"csrf": csrf_token(new_session(ADMIN_TOKEN, rt.clock()))}, follow_redirects=False
        )
        assert page.status_code == 403  # not this session's CSRF token: refused before Redis is asked
        session = client.cookies[COOKIE]
        answer = client.post("/ui/logout", data={"csrf": csrf_token(session)}, follow_redirects=False)
        assert answer.status_code == 503 and "still logged in" in answer.text
        assert "set-cookie" not in answer.headers  # the browser keeps it, to log out again once Redis is back
