"""schemathesis against the in-process app's own /openapi.json: every operation, all of its default checks.

schemathesis' pytest plugin (`from_fixture`) fails under pytest 9 ('Function' object has no attribute
'_nodeid'), so each operation's hypothesis strategy is driven directly (the plugin is not even loaded:
pyproject.toml). Cases are derandomized and bounded (tests/conftest.py `fuzz`); RELAY_FUZZ_SCALE=10 runs ten
times as many.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from redis import Redis
from schemathesis.checks import positive_data_acceptance

from relay.admin.openapi import openapi_document
from relay.config import Config
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build
from tests.conftest import ADMIN_TOKEN, WEBHOOK_TOKEN, fuzz

# Both credentials on every call: admin endpoints read the bearer token, the webhook its own header.
HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}", "X-Relay-Token": WEBHOOK_TOKEN}
# The document of the real app (listing its routes needs no Redis connection). The admin page's
# operations answer HTML pages, their errors included, not the API's error body: they are not fuzzed here.
DOCUMENT = openapi_document(create_app(build(Config(), Redis())).routes)
OPERATIONS = [
    (path, method)
    for path, item in DOCUMENT["paths"].items()
    for method, operation in item.items()
    if "admin page" not in operation.get("tags", [])
]
# The webhook's body is the richest schema, and the dearest to draw (90 ms a case): tests/intake/test_fuzz.py
# fuzzes it further with cheaper strategies. Every other operation gets EXAMPLES_EACH.
EXAMPLES = {"/webhook": 30}
EXAMPLES_EACH = 25
# `since` is documented as a plain string, but only a duration or an ISO time is valid: a schema-valid
# value may rightly be refused, so "valid data is accepted" cannot hold for these operations.
FREE_FORM_SINCE = {"/api/v1/deliveries", "/api/v1/deliveries/replay", "/api/v1/deliveries/release"}
# A reload of a runtime with no config file behind it is rightly refused (422), whatever the request. An
# opt-out names a configured channel (or `*`), and a person is printable: no schema can say the first.
# A silence's matchers are free-form strings in the routes' syntax, and its end must be after now: no
# schema says either.
MAY_REFUSE_VALID = FREE_FORM_SINCE | {"/api/v1/reload", "/api/v1/people/{person}/preferences", "/api/v1/silences"}


def error_body(ctx: Any, response: Any, case: Any) -> bool:
    """Every 4xx and 5xx answers the platform's error body (SPEC, HTTP)."""
    if response.status_code < 400:
        return True
    body = response.json()
    assert isinstance(body["errors"], list) and all(isinstance(e, str) for e in body["errors"]), body
    assert isinstance(body["userMessage"], str) and body["userMessage"], body
    assert isinstance(body["moreInfo"]["problems"], list), body
    assert isinstance(body["moreInfo"]["solutions"], list), body
    return True


@pytest.mark.parametrize(("path", "method"), OPERATIONS)
def test_api_conforms_to_its_openapi_document(rt: Runtime, path: str, method: str) -> None:
    rt.store.heartbeat("fuzz-worker")  # /readyz answers 200, not its (documented) 503
    operation = schemathesis.openapi.from_asgi("/openapi.json", create_app(rt))[path][method.upper()]
    excluded = [positive_data_acceptance] if path in MAY_REFUSE_VALID else []

    @given(case=operation.as_strategy())
    @fuzz(EXAMPLES.get(path, EXAMPLES_EACH), suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        response = case.call(headers=HEADERS)
        case.validate_response(response, additional_checks=[error_body], excluded_checks=excluded)

    run()
