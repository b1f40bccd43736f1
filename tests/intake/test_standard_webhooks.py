"""Standard Webhooks (standardwebhooks.com) beside relay's own HMAC: signatures made by the spec's reference
library (`standardwebhooks`) and its published test vectors are accepted; a tampered, stale or future one is
refused, as the reference library refuses it; a replayed call is a duplicate and sends nothing twice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError
from starlette.testclient import TestClient

from relay.config import ServerConfig, StandardWebhooksAuth, read_config
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.web.auth import standard_signature_problem
from tests.conftest import post, sample_notification
from tests.intake.test_http import assert_error_body

# The reference library's own test vectors (libraries/python/tests/test_webhooks.py of standard-webhooks).
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
AT = 1614265330
PAYLOAD = b'{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
WRONG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="
OTHER = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
NEXT_SECRET = "whsec_" + "QWxsIHRoZSBzZWNyZXRzIHJvdGF0ZSBpbiB0dXJu"  # a second one, for rotation


def _headers(signature: str = SIGNATURE, msg_id: str = MSG_ID, at: int | str = AT) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(at), "webhook-signature": signature}


def _both_say(headers: dict[str, str], body: bytes, now: float, problem: str | None) -> None:
    """relay's answer, and the reference library's at the same moment, agree."""
    auth = StandardWebhooksAuth(secrets=[SECRET])
    assert standard_signature_problem(auth, headers, body, now) == problem
    reference = Webhook(SECRET)
    checked = datetime.fromtimestamp(now, UTC)
    with pytest.MonkeyPatch.context() as patch:  # the library reads the wall clock: shown the same instant
        patch.setattr("standardwebhooks.webhooks.datetime", _Frozen.at(checked))
        if problem is None:
            reference.verify(body, headers, json_parse=False)
        else:
            with pytest.raises(WebhookVerificationError):
                reference.verify(body, headers, json_parse=False)


class _Frozen(datetime):
    moment: datetime

    @classmethod
    def at(cls, moment: datetime) -> type[_Frozen]:
        return type("Frozen", (cls,), {"moment": moment})

    @classmethod
    def now(cls, tz: Any = None) -> _Frozen:  # type: ignore[override]
        return cls.moment  # type: ignore[return-value]


def test_the_reference_test_vectors() -> None:
    assert Webhook(SECRET).sign(MSG_ID, datetime.fromtimestamp(AT, UTC), PAYLOAD.decode()) == SIGNATURE
    _both_say(_headers(), PAYLOAD, AT, None)
    _both_say(_headers(f"{OTHER} v2,{SIGNATURE[3:]} {SIGNATURE} {OTHER}"), PAYLOAD, AT, None)  # several, one good
    _both_say(_headers(WRONG), PAYLOAD, AT, "signature mismatch")
    _both_say(_headers(f"v2,{SIGNATURE[3:]}"), PAYLOAD, AT, "signature mismatch")  # only v1 is defined
    _both_say(_headers(), PAYLOAD + b" ", AT, "signature mismatch")
    _both_say(_headers(msg_id="msg_other"), PAYLOAD, AT, "signature mismatch")
    for now in (AT - 301, AT + 301):  # the spec's five minutes, either way
        _both_say(_headers(), PAYLOAD, now, "webhook-timestamp outside the tolerance")
    for now in (AT - 300, AT + 300):
        _both_say(_headers(), PAYLOAD, now, None)
    for broken in ({"webhook-id": ""}, {"webhook-timestamp": "hello"}, {"webhook-timestamp": ""}):
        _both_say({**_headers(), **broken}, PAYLOAD, AT, "missing webhook-id or malformed webhook-timestamp")


@pytest.fixture
def signed_rt(make_runtime: Any) -> Runtime:
    rt: Runtime = make_runtime(server={"auth": {"standard_webhooks": {"secrets": [SECRET, NEXT_SECRET]}}})
    return rt


@pytest.fixture
def client(signed_rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(signed_rt)) as client:
        yield client


def _send(client: TestClient, rt: Runtime, raw: bytes, secret: str = SECRET, at: float | None = None) -> Any:
    when = datetime.fromtimestamp(rt.clock() if at is None else at, UTC)
    headers = {**_headers(Webhook(secret).sign("msg_1", when, raw.decode()), "msg_1", int(when.timestamp()))}
    return client.post("/webhook", content=raw, headers={"Content-Type": "application/json", **headers})


def test_a_notification_signed_by_the_reference_library_is_accepted_with_either_secret(
    client: TestClient, signed_rt: Runtime
) -> None:
    for secret in (SECRET, NEXT_SECRET):
        raw = json.dumps(sample_notification()).encode()
        answer = _send(client, signed_rt, raw, secret)
        assert answer.status_code == 202, answer.text
        assert answer.json()["status"] == "accepted"


def test_the_test_vector_itself_passes_the_signature_check(client: TestClient, signed_rt: Runtime) -> None:
    signed_rt.clock.set(AT)  # type: ignore[attr-defined]
    headers = {"Content-Type": "application/json", **_headers()}
    # Signed right, but `{"test": ...}` is not a notification: past the credentials (422, not 401).
    assert client.post("/webhook", content=PAYLOAD, headers=headers).status_code == 422
    headers["webhook-signature"] = WRONG
    assert_error_body(client.post("/webhook", content=PAYLOAD, headers=headers), 401)


def test_tampered_stale_and_unsigned_calls_are_refused_and_a_replay_sends_nothing_twice(
    client: TestClient, signed_rt: Runtime
) -> None:
    raw = json.dumps(sample_notification()).encode()
    now = signed_rt.clock()
    when = datetime.fromtimestamp(now, UTC)
    good = {**_headers(Webhook(SECRET).sign("msg_2", when, raw.decode()), "msg_2", int(now))}
    tampered = raw.replace(b"Access", b"Excess")
    assert_error_body(client.post("/webhook", content=tampered, headers=good), 401)
    assert_error_body(_send(client, signed_rt, raw, at=now - 301), 401)  # stale
    assert_error_body(_send(client, signed_rt, raw, at=now + 301), 401)  # from the future
    wrong_key = "whsec_" + "d3JvbmcgZm9yIHRoaXMgcmVsYXkgaW5zdGFuY2U="
    assert_error_body(_send(client, signed_rt, raw, secret=wrong_key), 401)
    assert_error_body(post(client, sample_notification()), 401)  # no token is configured
    headers = {"Content-Type": "application/json", **good}
    assert client.post("/webhook", content=raw, headers=headers).json()["status"] == "accepted"
    # The same call again within the tolerance: its eventId is a duplicate, nothing is planned twice.
    assert client.post("/webhook", content=raw, headers=headers).json()["status"] == "duplicate"


def test_the_config_takes_whsec_secrets_only_and_never_shows_them(tmp_path: Path) -> None:
    assert StandardWebhooksAuth.model_validate({"secret": SECRET}).keys[0] == Webhook(SECRET)._whsecret
    server = ServerConfig.model_validate({"auth": {"standard_webhooks": {"secret": SECRET}}})
    assert server.auth.enabled and SECRET in server.secrets() and SECRET[6:] in server.secrets()
    for bad in (SECRET[6:], "whsec_c2hvcnQ=", "whsec_not base64 at all!!", "x" * 40):
        path = tmp_path / "config.yaml"
        path.write_text(json.dumps({"server": {"auth": {"standard_webhooks": {"secrets": [bad]}}}}))
        problems = read_config(path, environ={}).problems
        assert problems == [
            "server.auth.standard_webhooks.secrets: secret 0 is not whsec_ and the base64 of 24 bytes or more"
        ], problems
        assert bad not in " ".join(problems)
