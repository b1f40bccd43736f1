"""E-mail look-up in the platform catalog, against a local server that plays the platform."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import admin, post, run_scheduled, run_worker, sample_notification
from tests.platform_fake import ACCESS_TOKEN, FakePlatform
from tests.servers import HttpSink, SmtpSink


@pytest.fixture
def platform() -> Iterator[FakePlatform]:
    fake = FakePlatform(
        users={"carla.neri": "carla.neri@example.com", "dario.blu": "dario.blu@example.com", "nomail": None},
        groups={"data-managers": ["user:default/carla.neri", "user:default/dario.blu", "user:default/ghost"]},
    ).start()
    yield fake
    fake.stop()


def managers_message(*recipients: dict[str, Any]) -> dict[str, Any]:
    return sample_notification(
        messages=[
            {
                "recipientType": "recipient-type:system-owner",
                "recipientType_v2": "recipient-type:project-data-access-manager",
                "recipients": list(recipients),
                "title": "Access request failed in a project you manage",
                "message": "An access request to Invoices SQL output port failed.",
            }
        ]
    )


def user(ref: str | None, email: str | None = None) -> dict[str, Any]:
    return {"userRef": ref, "metadata.name": ref.split("/")[-1] if ref else None, "spec.email": email, "kind": "User"}


@pytest.fixture
def catalog_rt(make_runtime: Any, platform: FakePlatform) -> Runtime:
    rt: Runtime = make_runtime(
        platform={"url": platform.url, "access_token": ACCESS_TOKEN, "jwt_duration": "10m", "timeout": "1s"},
        routes=[{"channels": ["requester-email", "owners-hook"]}],
        default={"channels": []},
    )
    return rt


def states(client: TestClient, payload: dict[str, Any]) -> list[dict[str, Any]]:
    answer = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    return sorted(answer["deliveries"], key=lambda d: (d["channel"], d["recipient"] or ""))


def test_missing_email_is_found_in_the_catalog_and_cached(
    catalog_rt: Runtime, platform: FakePlatform, smtp: SmtpSink, sink: HttpSink
) -> None:
    first = managers_message(user("user:default/carla.neri"))
    second = managers_message(user("user:default/carla.neri"))
    with TestClient(create_app(catalog_rt)) as client:
        post(client, first)
        run_worker(catalog_rt)
        post(client, second)
        run_worker(catalog_rt)
        records = states(client, first)
    assert [m.envelope_to for m in smtp.mails] == [["carla.neri@example.com"], ["carla.neri@example.com"]]
    email = next(d for d in records if d["channel"] == "requester-email")
    assert email["state"] == "delivered" and email["address"] == "carla.neri@example.com"
    assert len(sink.at("/owners")) == 2  # the audience channel never waited for the catalog
    assert platform.lookups == ["user:default/carla.neri"]  # the second one came from the cache
    assert len(platform.exchanges) == 1
    assert platform.exchanges[0] == {"access_token": ACCESS_TOKEN, "duration_seconds": 600}
    assert platform.auth_headers == ["Bearer jwt-1-secret"]


def test_expired_jwt_is_exchanged_again(catalog_rt: Runtime, platform: FakePlatform, smtp: SmtpSink) -> None:
    with TestClient(create_app(catalog_rt)) as client:
        post(client, managers_message(user("user:default/carla.neri")))
        run_worker(catalog_rt)
        platform.expire_all()  # the platform now answers 401 to the JWT relay holds
        post(client, managers_message(user("user:default/dario.blu")))
        run_worker(catalog_rt)
    assert len(platform.exchanges) == 2
    assert sorted(m.envelope_to[0] for m in smtp.mails) == ["carla.neri@example.com", "dario.blu@example.com"]


def test_group_expands_to_its_members(catalog_rt: Runtime, platform: FakePlatform, smtp: SmtpSink) -> None:
    payload = managers_message({"userRef": "group:default/data-managers", "spec.email": None})
    with TestClient(create_app(catalog_rt)) as client:
        post(client, payload)
        run_worker(catalog_rt)
        records = states(client, payload)
    assert sorted(m.envelope_to[0] for m in smtp.mails) == ["carla.neri@example.com", "dario.blu@example.com"]
    group = next(d for d in records if d["recipient"] == "group:default/data-managers")
    # Not `skipped` (nothing was left unsent): `expanded`, naming the member deliveries it became.
    assert group["state"] == "expanded" and "expanded into 2 member deliveries" in group["lastError"]
    members = [d for d in records if d["channel"] == "requester-email" and d["recipient"] != group["recipient"]]
    assert {(d["recipient"], d["state"]) for d in members} == {
        ("carla.neri@example.com", "delivered"),
        ("dario.blu@example.com", "delivered"),
    }
    assert sorted(group["members"]) == sorted(d["id"] for d in members)
    counters = catalog_rt.store.counters()
    assert not [k for k in counters if "state=skipped" in k and "requester-email" in k]


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("user:default/nobody", "no e-mail address for user:default/nobody in the platform catalog"),
        ("user:default/nomail", "no e-mail address for user:default/nomail in the platform catalog"),
    ],
)
def test_unknown_user_or_user_without_email_is_skipped(
    catalog_rt: Runtime, smtp: SmtpSink, ref: str, reason: str
) -> None:
    payload = managers_message(user(ref))
    with TestClient(create_app(catalog_rt)) as client:
        post(client, payload)
        run_worker(catalog_rt)
        email = next(d for d in states(client, payload) if d["channel"] == "requester-email")
    assert email["state"] == "skipped" and email["lastError"] == reason
    assert smtp.mails == []


def test_references_with_dot_segments_never_reach_the_platform(
    catalog_rt: Runtime, platform: FakePlatform, smtp: SmtpSink
) -> None:
    """`..:../secrets` made relay GET /api/catalog/secrets with its JWT (the client removes dot segments).
    Each part is one percent-encoded segment; `.` and `..` are refused, the delivery skipped, nothing asked."""
    platform.groups["sneaky"] = ["user:../secrets", "user:default/dario.blu"]
    payload = managers_message(
        user("..:../secrets"),
        user("user:default/.."),
        user("user:./x"),
        user("user:team a/b?c#d%2E%2E"),
        {"userRef": "group:default/sneaky", "spec.email": None},
    )
    with TestClient(create_app(catalog_rt)) as client:
        post(client, payload)
        run_worker(catalog_rt)
        records = {d["recipient"]: d for d in states(client, payload) if d["channel"] == "requester-email"}
    prefix = "/api/catalog/entities/by-name/"
    assert sorted(platform.paths) == [
        prefix + "group/default/sneaky",
        prefix + "user/default/dario.blu",  # the group's other member
        prefix + "user/team%20a/b%3Fc%23d%252E%252E",  # reserved characters and `%` encoded: still one segment
    ]
    reasons = {ref: records[ref]["lastError"] for ref in ("..:../secrets", "user:default/..", "user:./x")}
    said = "recipient reference {!r} not looked up in the platform catalog: its {} is {!r}"
    assert reasons == {
        "..:../secrets": said.format("..:../secrets", "kind", ".."),
        "user:default/..": said.format("user:default/..", "name", ".."),
        "user:./x": said.format("user:./x", "namespace", "."),
    }
    assert all(records[ref]["state"] == "skipped" for ref in reasons)
    assert [m.envelope_to for m in smtp.mails] == [["dario.blu@example.com"]]


def test_platform_down_retries_the_lookup_and_others_go_on(
    catalog_rt: Runtime, platform: FakePlatform, smtp: SmtpSink, sink: HttpSink
) -> None:
    platform.down = True
    payload = managers_message(user("user:default/carla.neri"), user(None, "direct@example.com"))
    with TestClient(create_app(catalog_rt)) as client:
        post(client, payload)
        run_worker(catalog_rt)
        records = states(client, payload)
        looked = next(d for d in records if d["recipient"] == "user:default/carla.neri")
        assert looked["state"] == "retrying" and "catalog" in looked["lastError"] and "503" in looked["lastError"]
        assert [m.envelope_to for m in smtp.mails] == [["direct@example.com"]]
        assert len(sink.at("/owners")) == 1
        platform.down = False
        run_scheduled(catalog_rt)
        run_worker(catalog_rt)
        looked = next(d for d in states(client, payload) if d["recipient"] == "user:default/carla.neri")
    assert looked["state"] == "delivered" and looked["attempts"] == 2
    assert sorted(m.envelope_to[0] for m in smtp.mails) == ["carla.neri@example.com", "direct@example.com"]


def test_slow_platform_is_a_timeout_and_retried(catalog_rt: Runtime, platform: FakePlatform) -> None:
    platform.delay = 1.5  # over the 1 s timeout of this config
    payload = managers_message(user("user:default/carla.neri"))
    with TestClient(create_app(catalog_rt)) as client:
        post(client, payload)
        run_worker(catalog_rt)
        looked = next(d for d in states(client, payload) if d["channel"] == "requester-email")
    assert looked["state"] == "retrying" and "Timeout" in looked["lastError"]


def test_basic_auth_sends_the_token_as_password(make_runtime: Any, platform: FakePlatform, smtp: SmtpSink) -> None:
    rt = make_runtime(
        platform={"url": platform.url, "access_token": ACCESS_TOKEN, "auth": "basic"},
        routes=[{"channels": ["requester-email"]}],
    )
    with TestClient(create_app(rt)) as client:
        post(client, managers_message(user("user:default/dario.blu")))
        run_worker(rt)
    assert platform.exchanges == []
    assert platform.auth_headers and all(h.startswith("Basic ") for h in platform.auth_headers)
    assert [m.envelope_to for m in smtp.mails] == [["dario.blu@example.com"]]


def test_tokens_never_reach_the_logs(
    catalog_rt: Runtime, platform: FakePlatform, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(catalog_rt)) as client:
        post(client, managers_message(user("user:default/carla.neri")))
        run_worker(catalog_rt)
        platform.down = True
        post(client, managers_message(user("user:default/dario.blu")))
        run_worker(catalog_rt)
        listing = admin(client, "/api/v1/deliveries?limit=500").text
    text = caplog.text + listing
    assert ACCESS_TOKEN not in text
    assert "jwt-1-secret" not in text
