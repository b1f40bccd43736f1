"""The OpenAPI document is made from the app itself: every route is in it, and the example payloads and
the error answers the app really gives validate against its schemas."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from starlette.routing import Route
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import ADMIN_TOKEN, WEBHOOK_TOKEN, admin, post, sample_notification

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = sorted(DATA.glob("*.json"))


def validator(doc: dict[str, Any], component: str) -> Draft202012Validator:
    """A validator of one component schema, its references resolved in the document itself."""
    schema = {"$ref": f"#/components/schemas/{component}", "components": doc["components"]}
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.fixture
def doc(client: TestClient) -> dict[str, Any]:
    answer = client.get("/openapi.json")
    assert answer.status_code == 200
    return dict(answer.json())


def test_every_route_of_the_app_is_in_the_document_with_its_methods(rt: Runtime, doc: dict[str, Any]) -> None:
    app = create_app(rt)
    seen = 0
    for route in app.routes:
        assert isinstance(route, Route)
        path = re.sub(r"{(\w+)(:\w+)?}", r"{\1}", route.path)
        assert path in doc["paths"], path
        for method in (route.methods or set()) - {"HEAD"}:
            operation = doc["paths"][path][method.lower()]
            # Described by its handler, not the stand-in of an undescribed route ("default" answer).
            assert operation["summary"] and "default" not in operation["responses"], (path, method)
            seen += 1
    # ... and nothing that the app does not serve.
    assert seen == sum(len(item) for item in doc["paths"].values())
    assert {"/webhook", "/openapi.json", "/ui/login", "/api/v1/reload"} <= set(doc["paths"])


def test_the_webhook_path_is_the_configured_one(make_runtime: Any) -> None:
    rt = make_runtime(server={"auth": {"tokens": [WEBHOOK_TOKEN]}, "path": "/hooks/platform"})
    with TestClient(create_app(rt)) as client:
        paths = client.get("/openapi.json").json()["paths"]
    assert "post" in paths["/hooks/platform"] and "/webhook" not in paths


def webhook_request_schema(doc: dict[str, Any]) -> str:
    webhook = doc["paths"]["/webhook"]["post"]
    ref = webhook["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return str(ref.rsplit("/", 1)[1])


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_every_example_payload_validates_and_is_accepted(
    doc: dict[str, Any], client: TestClient, example: Path
) -> None:
    payload = json.loads(example.read_text())
    validator(doc, webhook_request_schema(doc)).validate(payload)
    assert post(client, payload).status_code == 202


def test_the_request_schema_refuses_what_the_webhook_refuses(doc: dict[str, Any], client: TestClient) -> None:
    check = validator(doc, webhook_request_schema(doc))
    for broken in (
        {k: v for k, v in sample_notification().items() if k != "metadata"},
        sample_notification(kind=""),
        sample_notification(messages="not a list"),
        {**sample_notification(), "metadata": {"eventId": 5}},
    ):
        with pytest.raises(ValidationError):
            check.validate(broken)
        assert post(client, broken).status_code == 422


def test_error_answers_validate_against_the_error_schema(doc: dict[str, Any], client: TestClient) -> None:
    check = validator(doc, "Error")
    answers = [
        client.post("/webhook", json=sample_notification()),  # 401
        post(client, {"kind": "x"}),  # 422, with inputErrorField
        post(client, "[1]", headers={"Content-Type": "text/plain"}),  # 415
        client.post(
            "/webhook",
            content=b"{",
            headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}", "Content-Type": "application/json"},
        ),  # 400
        admin(client, "/api/v1/events/nope"),  # 404
        admin(client, "/api/v1/deliveries?limit=0"),  # 422
        admin(client, "/api/v1/deliveries/replay", method="POST", json={"ids": "abc"}),  # 422
        client.get("/api/v1/deliveries"),  # 401
        client.get("/readyz"),  # 503: no worker
        client.get("/nope"),  # 404
        client.delete("/webhook"),  # 405
    ]
    statuses = set()
    for answer in answers:
        assert answer.status_code >= 400, answer.text
        check.validate(answer.json())
        statuses.add(answer.status_code)
    assert statuses == {400, 401, 404, 405, 415, 422, 503}
    with pytest.raises(ValidationError):
        check.validate({"errors": ["x"], "moreInfo": {"problems": [], "solutions": []}})  # no userMessage


def test_answers_of_the_admin_api_validate_against_their_schemas(doc: dict[str, Any], client: TestClient) -> None:
    payload = sample_notification()
    assert post(client, payload).status_code == 202
    event_id = payload["metadata"]["eventId"]
    ops = doc["paths"]
    for path, url, method, body in (
        ("/api/v1/events/{eventId}", f"/api/v1/events/{event_id}", "get", None),
        ("/api/v1/deliveries", "/api/v1/deliveries?since=1h", "get", None),
        ("/api/v1/deliveries/replay", "/api/v1/deliveries/replay", "post", {"ids": ["x"], "dryRun": True}),
    ):
        schema = ops[path][method]["responses"]["200"]["content"]["application/json"]["schema"]
        answer = admin(client, url, method=method.upper(), json=body)
        assert answer.status_code == 200, answer.text
        Draft202012Validator({**schema, "components": doc["components"]}).validate(answer.json())


def test_admin_operations_name_the_admin_token(doc: dict[str, Any]) -> None:
    for path, item in doc["paths"].items():
        for operation in item.values():
            if path.startswith("/api/v1/"):
                assert operation["security"] == [{"adminToken": []}]
                assert "401" in operation["responses"]
    assert ADMIN_TOKEN not in json.dumps(doc) and WEBHOOK_TOKEN not in json.dumps(doc)
