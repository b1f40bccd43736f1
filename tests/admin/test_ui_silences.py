"""The admin page's silences: the section lists the active and pending ones, the form adds one, Expire ends
one and releases what it held; a held delivery says which silence holds it and why; forged forms are refused.
Real Redis, RQ and HTTP sink; the runtime's clock."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.silences.model import Silence
from relay.silences.store import Silences
from tests.admin.forms import CROSS_SITE, csrf_of
from tests.admin.test_ui_held import login, section
from tests.conftest import admin, post, run_worker, sample_notification
from tests.servers import HttpSink

NOW = float(int(time.time()))


@pytest.fixture
def page(rt: Runtime) -> Iterator[TestClient]:
    rt.clock.set(NOW)
    with TestClient(create_app(rt)) as client:
        yield login(client)


def _add(page: TestClient, **fields: str) -> Any:
    csrf = csrf_of(page.get("/ui").text)
    form = {"csrf": csrf, "matchers": 'channel="owners-hook"', "duration": "2h", "comment": "db move", **fields}
    return page.post("/ui/silences", data=form, follow_redirects=False)


def test_add_list_hold_and_expire_from_the_page(rt: Runtime, page: TestClient, sink: HttpSink) -> None:
    html = page.get("/ui").text
    assert "No silence: nothing is muted." in section(html, "silences")
    answer = _add(page, createdBy="ana")
    assert answer.status_code == 303 and answer.headers["location"] == "/ui?added=1#silence-notice"
    # Its notice sits in the silences section, where the page lands (issue 48: none was shown).
    assert 'id="silence-notice"' in section(page.get(answer.headers["location"]).text, "silences")
    [silence] = Silences(rt.redis).all()
    assert (silence.matchers, silence.createdBy, silence.action) == (('channel="owners-hook"',), "ana", "hold")
    assert silence.endsAt == NOW + 7200
    # A pending one is listed too; an expired one is not.
    start = NOW + 600
    for ident, begins in (("later", start), ("old", NOW - 90)):
        Silences(rt.redis).put(Silence(ident, ('kind="x"',), begins, begins + 60, "bo", "c", "skip"))
    listed = section(page.get("/ui").text, "silences")
    assert re.findall(r'data-id="([^"]+)" data-state="(\w+)"', listed) == [(silence.id, "active"), ("later", "pending")]
    assert "db move" in listed and "ana" in listed and "channel=&#34;owners-hook&#34;" in listed
    # What it holds says so in the held view.
    assert post(page, sample_notification()).status_code == 202
    run_worker(rt)
    held = section(page.get("/ui").text, "held")
    assert f"silenced by {silence.id} (ana): db move" in held
    # Expire: released, then sent.
    csrf = csrf_of(page.get("/ui").text)
    answer = page.post("/ui/silences/expire", data={"csrf": csrf, "id": silence.id}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui?expired=1#silence-notice"
    notice = section(page.get(answer.headers["location"]).text, "silences")
    assert 'id="silence-notice"' in notice and "Silence expired: 1 held delivery goes out now." in notice
    assert "Silence expired: it held nothing." in section(page.get("/ui?expired=0").text, "silences")
    run_worker(rt)
    assert len(sink.at("/owners")) == 1
    assert silence.id not in section(page.get("/ui").text, "silences")
    expired = admin(page, "/api/v1/silences?state=expired").json()["silences"]
    assert {s["id"] for s in expired} == {silence.id, "old"}


def test_a_skip_from_the_page_and_a_bad_one_named(rt: Runtime, page: TestClient) -> None:
    assert _add(page, action="skip").status_code == 303
    assert [s.action for s in Silences(rt.redis).all()] == ["skip"]
    bad = _add(page, matchers='nope="x"')
    assert bad.status_code == 422 and "matchers" in bad.text
    assert _add(page, duration="soon").status_code == 422
    assert len(Silences(rt.redis).all()) == 1
    csrf = csrf_of(page.get("/ui").text)
    gone = page.post("/ui/silences/expire", data={"csrf": csrf, "id": "nope"}, follow_redirects=False)
    assert gone.status_code == 404


@CROSS_SITE
def test_forged_forms_are_refused(rt: Runtime, page: TestClient, form: dict[str, str], headers: dict[str, str]) -> None:
    csrf = csrf_of(page.get("/ui").text)
    fields = {k: (csrf if v == "CSRF" else v) for k, v in form.items()}
    add = {**fields, "matchers": 'kind="x"', "duration": "1h", "comment": "c"}
    assert page.post("/ui/silences", data=add, headers=headers, follow_redirects=False).status_code == 403
    assert Silences(rt.redis).all() == []
    assert _add(page).status_code == 303
    [silence] = Silences(rt.redis).all()
    expire = {**fields, "id": silence.id}
    assert page.post("/ui/silences/expire", data=expire, headers=headers, follow_redirects=False).status_code == 403
    assert Silences(rt.redis).all()[0].endsAt == silence.endsAt


def test_the_form_suggests_a_channel_of_this_config_and_labels_its_fields_by_what_they_say(page: TestClient) -> None:
    form = section(page.get("/ui").text, "silences")
    assert 'placeholder=\'channel="owners-hook"' in form and "owners-slack" not in form  # the config's first channel
    assert 'aria-label="duration"' not in form and "<label>For <input" in form  # its label names it "For"
