"""With Redis unreachable, each people's page answers 503 with Retry-After (nothing read or stored), never a
500: a save whose hours are refused, which shows the page again, included."""

from __future__ import annotations

from pathlib import Path

from redis import Redis
from starlette.testclient import TestClient

from relay.people.pages import csrf_for
from relay.runtime.app import create_app
from relay.runtime.bootstrap import build
from relay.web.links import PREFERENCES_PATH, SCOPE_PREFERENCES, SCOPE_UNSUBSCRIBE, UNSUBSCRIBE_PATH, Link, make_token
from tests.conftest import base_config
from tests.servers import HttpSink, SmtpSink, free_port

SECRET = "a-secret-of-at-least-thirty-two-bytes!"
ALICE = "user:default/alice.rossi"


def test_redis_unreachable_is_a_503_on_every_people_page(sink: HttpSink, smtp: SmtpSink, tmp_path: Path) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    preferences = {"public_url": "http://testserver", "secret": SECRET}
    config = base_config(sink, smtp, tmp_path, dead, preferences=preferences)
    rt = build(config, Redis.from_url(dead, socket_connect_timeout=0.5, socket_timeout=0.5))
    page = make_token(SECRET, Link(ALICE, SCOPE_PREFERENCES, rt.clock()))
    unsubscribe = make_token(SECRET, Link(ALICE, SCOPE_UNSUBSCRIBE, rt.clock(), "notification:x", "requester-email"))
    no_day = {"csrf": csrf_for(SECRET, page), "hours": "set"}  # refused for its hours: the page is shown again
    with TestClient(create_app(rt), raise_server_exceptions=False) as client:
        answers = [
            client.get(PREFERENCES_PATH + page),
            client.post(PREFERENCES_PATH + page, data=no_day, follow_redirects=False),
            client.get(UNSUBSCRIBE_PATH + unsubscribe),
            client.post(UNSUBSCRIBE_PATH + unsubscribe, data={"List-Unsubscribe": "One-Click"}),
        ]
    assert [a.status_code for a in answers] == [503] * 4
    assert all(a.headers["retry-after"] == "5" and a.headers["cache-control"] == "no-store" for a in answers)
    assert answers[0].json()["userMessage"] == "Your preferences cannot be read right now."
