"""A silence no reader could show is refused at the door, and one stored anyway (by hand, or corrupt) takes
nothing down: the listing, the page, DELETE, /metrics and the workers leave it out with one log line. A hold
that reaches past `retention` says so (issue 45). Real Redis and RQ; the runtime's clock."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.silences.store import SILENCES
from tests.admin.forms import csrf_of
from tests.admin.test_ui_held import login, section
from tests.conftest import admin, post, run_worker, sample_notification
from tests.servers import HttpSink

pytestmark = pytest.mark.dated

NOW = float(int(time.time()))
OWNERS = 'channel="owners-hook"'
LATER = "2999-01-01T00:00:00Z"
YEAR_ZERO = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=23, minutes=59))).timestamp()


@pytest.fixture
def page(rt: Runtime) -> Iterator[TestClient]:
    rt.clock.set(NOW)
    with TestClient(create_app(rt)) as client:
        yield login(client)


def _create(client: TestClient, **extra: Any) -> Any:
    body = {"matchers": [OWNERS], "duration": "1h", "createdBy": "ana", "comment": "db move", **extra}
    return admin(client, "/api/v1/silences", "POST", json={k: v for k, v in body.items() if v is not None})


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"startsAt": "0001-01-01T00:00:00+23:59"}, "startsAt"),  # the year 0 once in UTC: the 500
        ({"startsAt": "0001-01-01T00:00:00+05:00", "duration": None, "endsAt": LATER}, "startsAt"),
        ({"startsAt": "1969-12-31T23:59:59Z", "duration": None, "endsAt": LATER}, "startsAt"),
        ({"startsAt": "yesterday"}, "startsAt"),
        ({"startsAt": 1_800_000_000}, "startsAt"),  # a number is no ISO 8601 time
        ({"duration": None, "endsAt": "9999-12-31T23:59:59-00:01"}, "endsAt"),  # the year 10000 in UTC
        ({"duration": None, "endsAt": "10000-01-01T00:00:00Z"}, "endsAt"),
    ],
)
def test_a_time_no_reader_could_show_is_refused_naming_its_field(
    page: TestClient, extra: dict[str, Any], field: str
) -> None:
    answer = _create(page, **extra)
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert error["inputErrorField"] == field and field in error["userMessage"] and error["moreInfo"]["problems"]
    listed = admin(page, "/api/v1/silences")
    assert (listed.status_code, listed.json()) == (200, {"silences": []})
    assert page.get("/ui").status_code == 200


def test_times_anywhere_in_the_range_and_any_offset_are_taken(page: TestClient) -> None:
    first = _create(page, startsAt="1970-01-01T00:00:00Z", duration=None, endsAt="9999-12-31T23:59:59Z").json()
    assert (first["startsAt"], first["endsAt"]) == ("1970-01-01T00:00:00.000Z", "9999-12-31T23:59:59.000Z")
    naive = _create(page, duration=None, endsAt="2999-01-01T02:00:00", startsAt="2998-12-31T23:00:00-01:00").json()
    assert (naive["startsAt"], naive["endsAt"]) == ("2999-01-01T00:00:00.000Z", "2999-01-01T02:00:00.000Z")


def _unreadable() -> dict[str, str | bytes]:
    """Silences as a hand edit or a corruption leaves them, by their id in the hash."""
    tag = uuid.uuid4().hex[:8]  # each test's own: a process logs an unreadable silence once
    fine = {"matchers": [OWNERS], "startsAt": NOW - 60, "endsAt": NOW + 3600, "createdBy": "x", "comment": "c"}
    return {
        f"json-{tag}": "{not json",
        f"empty-{tag}": "{}",
        f"list-{tag}": "[1, 2]",
        f"bytes-{tag}": b"\xff\xfe\x00",
        f"zero-{tag}": json.dumps({**fine, "id": f"zero-{tag}", "startsAt": YEAR_ZERO}),  # as the bug stored it
        f"far-{tag}": json.dumps({**fine, "id": f"far-{tag}", "endsAt": 1e300}),
        f"nan-{tag}": json.dumps({**fine, "id": f"nan-{tag}", "endsAt": float("nan")}),
        f"matcher-{tag}": json.dumps({**fine, "id": f"matcher-{tag}", "matchers": ['nope="x"']}),
        f"other-{tag}": json.dumps({**fine, "id": "another-id"}),  # not the id it is kept under
    }


def test_an_unreadable_silence_is_logged_once_and_left_out_everywhere(
    rt: Runtime, page: TestClient, sink: HttpSink, caplog: pytest.LogCaptureFixture
) -> None:
    good = _create(page).json()
    bad = _unreadable()
    rt.redis.hset(SILENCES, mapping=bad)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO)
    for _ in range(2):
        listed = admin(page, "/api/v1/silences")
        assert listed.status_code == 200
        assert [s["id"] for s in listed.json()["silences"]] == [good["id"]]
        html = page.get("/ui")
        assert html.status_code == 200
        assert re.findall(r'data-id="([^"]+)"', section(html.text, "silences")) == [good["id"]]
        metrics = page.get("/metrics")
        assert metrics.status_code == 200 and "relay_silences_active 1.0" in metrics.text.splitlines()
    # The workers obey the readable one, and deliver the rest.
    assert post(page, sample_notification()).status_code == 202
    run_worker(rt)
    assert sink.at("/owners") == [] and len(sink.at("/managers")) == 1
    # DELETE of an unreadable one: a 404 in the platform's error body, and the record left for its owner.
    for ident in bad:
        gone = admin(page, f"/api/v1/silences/{ident}", "DELETE")
        assert gone.status_code == 404, gone.text
        assert gone.json()["inputErrorField"] == "id"
    csrf = csrf_of(page.get("/ui").text)
    expired = page.post("/ui/silences/expire", data={"csrf": csrf, "id": next(iter(bad))}, follow_redirects=False)
    assert expired.status_code == 404
    assert rt.redis.hlen(SILENCES) == len(bad) + 1
    # One line per unreadable silence, naming it, however often it was read.
    lines = [r.getMessage() for r in caplog.records if "unreadable" in r.getMessage()]
    for ident in bad:
        assert len([line for line in lines if ident in line]) == 1, (ident, lines)
    assert len(lines) == len(bad)
    # Adding another still works (its prune reads them all), and leaves them there.
    assert _create(page).status_code == 201
    assert rt.redis.hlen(SILENCES) == len(bad) + 2


RETENTION_NOTE = "kept past retention (30d) until it ends"


def test_a_hold_past_retention_says_so_in_the_answer_and_on_the_page(page: TestClient) -> None:
    short = _create(page, duration="2h")
    assert short.status_code == 201 and short.json()["warnings"] == []
    skip = _create(page, duration="40d", action="skip")  # a skip holds nothing
    assert skip.status_code == 201 and skip.json()["warnings"] == []
    long = _create(page, duration="40d")
    assert long.status_code == 201
    [warning] = long.json()["warnings"]
    assert RETENTION_NOTE in warning and long.json()["endsAt"] in warning
    # Listed without warnings (they are the creation's); the page notes it on the silence's row.
    assert all("warnings" not in s for s in admin(page, "/api/v1/silences").json()["silences"])
    rows = section(page.get("/ui").text, "silences")
    noted = re.findall(r'data-id="([^"]+)"[^>]*>(?:(?!</tr>).)*?class="note"', rows, re.S)
    assert noted == [long.json()["id"]]
    assert RETENTION_NOTE in rows
    # Added from the page: the same note.
    csrf = csrf_of(page.get("/ui").text)
    form = {"csrf": csrf, "matchers": 'channel="audit-hook"', "duration": "45d", "comment": "long"}
    assert page.post("/ui/silences", data=form, follow_redirects=False).status_code == 303
    rows = section(page.get("/ui").text, "silences")
    assert len(re.findall(r'class="note"', rows)) == 2


def test_matchers_are_bounded_in_number_as_parsed(make_runtime: Callable[..., Runtime]) -> None:
    """Issue 46: at most 50 matchers a silence, counted as parsed (one line may hold many: 2,000 were taken)."""
    many = ", ".join(f'kind="k{i}"' for i in range(51))
    with TestClient(create_app(make_runtime())) as client:
        body = {"matchers": [many], "duration": "1h", "createdBy": "ana", "comment": "x"}
        answer = admin(client, "/api/v1/silences", "POST", json=body)
        assert answer.status_code == 422 and "at most 50" in answer.text, answer.text
        assert admin(client, "/api/v1/silences").json()["silences"] == []
