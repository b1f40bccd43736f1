"""Logging out of the admin page ends the session on the server: a copy of the cookie (captured before the
logout) opens nothing any more, on any API replica sharing the Redis, and after a restart."""

from __future__ import annotations

from collections.abc import Callable

from starlette.testclient import TestClient

from relay.admin.ui_session import COOKIE
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.sessions import ENDED
from tests.admin.forms import csrf_of
from tests.admin.test_ui import login


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
