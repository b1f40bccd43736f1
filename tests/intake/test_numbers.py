"""Numbers that are no number (NaN, Infinity, 1e400, which reads as infinity) are refused wherever relay reads
JSON, with the platform's error body naming the field; nothing of the call is stored."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from relay.core.numbers import may_hold_non_finite, non_finite_at
from relay.runtime.bootstrap import Runtime
from relay.storage.store import RECEIVED
from tests.conftest import admin, sample_notification
from tests.intake.test_http import assert_error_body, raw_post


def with_number(literal: str, event_id: str = "ev-number") -> bytes:
    payload = sample_notification()
    payload["metadata"]["eventId"] = event_id
    payload["body"] = {"amounts": [1, {"total": "@"}]}
    return json.dumps(payload).replace('"@"', literal).encode()


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "1E+999", "1" + "0" * 400 + ".5"])
def test_a_number_past_the_range_of_a_double_is_422_naming_its_field(
    client: TestClient, rt: Runtime, literal: str
) -> None:
    body = assert_error_body(raw_post(client, with_number(literal)), 422)

    assert body["inputErrorField"] == "body.amounts.1.total"
    assert "finite" in body["errors"][0]
    assert rt.store.event("ev-number") is None and not rt.redis.exists(RECEIVED)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_400_naming_their_field(client: TestClient, rt: Runtime, literal: str) -> None:
    body = assert_error_body(raw_post(client, with_number(literal)), 400)

    assert body["inputErrorField"] == "body.amounts.1.total"
    assert rt.store.event("ev-number") is None


def test_large_finite_numbers_and_lookalike_text_are_accepted(client: TestClient, rt: Runtime) -> None:
    payload = sample_notification()
    payload["body"] = {"big": 1.5e308, "tiny": 1e-400, "int": 10**400, "text": "NaN Infinity 1e400"}
    raw = json.dumps(payload).replace('"tiny": 0.0', '"tiny": 1e-400').encode()

    assert raw_post(client, raw).status_code == 202


JSON_TYPE = {"content-type": "application/json"}


def test_admin_api_bodies_refuse_them_too(client: TestClient) -> None:
    for literal in ("1e400", "NaN"):
        body = f'{{"dryRun": {literal}}}'.encode()
        answer = admin(client, "/api/v1/deliveries/replay", "POST", content=body, headers=JSON_TYPE)
        assert assert_error_body(answer, 422)["inputErrorField"] == "dryRun"
    answer = admin(
        client,
        "/api/v1/people/ann%40example.com/preferences",
        "PUT",
        content=b'{"optOuts": [{"kind": "k", "channel": "owners-hook", "n": -Infinity}]}',
        headers=JSON_TYPE,
    )
    assert assert_error_body(answer, 422)["inputErrorField"] == "optOuts.0.n"


def test_the_walk_names_the_first_in_document_order() -> None:
    assert non_finite_at({"a": [1.0, 2, {"b": float("inf")}], "c": float("nan")}) == "a.2.b"
    assert non_finite_at({"a": [1e308, "inf", None, True]}) is None
    assert non_finite_at(float("nan")) == ""
    assert may_hold_non_finite(b'{"a": 1e400}') and may_hold_non_finite(b'{"a": -0.5E+0999}')
    assert may_hold_non_finite(b'{"a": ' + b"9" * 400 + b".0}")
    lookalikes = b'{"a": 1.5e300, "b": 1e-400, "id": "3fa85f64-5e123", "i": "7e8706ab", "c": ' + b"1" * 250 + b"}"
    assert not may_hold_non_finite(lookalikes)
