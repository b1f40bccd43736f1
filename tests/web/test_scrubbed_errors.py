"""relay.web.errors.ScrubbedErrors: the process's redactor takes secrets out of every JSON error answer."""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from relay.core.redaction import MASK, Redactor, expand
from relay.web.errors import ScrubbedErrors, error_response

SECRET = "hunter2-s3cr3t/é"


async def refused(request: Request) -> Response:
    return error_response(502, [f"upstream said {SECRET}"], f"failed: {json.dumps(SECRET)}", field=SECRET)


async def fine(request: Request) -> Response:
    return JSONResponse({"echo": SECRET})


def test_an_error_answer_leaves_scrubbed_and_an_ordinary_answer_as_sent() -> None:
    redactor = Redactor(expand([SECRET]))
    routes = [Route("/refused", refused), Route("/fine", fine)]
    app = Starlette(routes=routes, middleware=[Middleware(ScrubbedErrors, redactor=redactor)])
    with TestClient(app) as client:
        answer = client.get("/refused")
        assert answer.status_code == 502
        assert int(answer.headers["content-length"]) == len(answer.content)
        assert SECRET not in answer.text and "hunter2" not in answer.text
        body = answer.json()
        assert body["errors"] == [f"upstream said {MASK}"] and body["inputErrorField"] == MASK
        assert body["moreInfo"]["problems"] == body["errors"]
        # A reload adds secrets to the same redactor: answers from then on hide them too.
        redactor.add(expand(["upstream"]))
        assert client.get("/refused").json()["errors"] == [f"{MASK} said {MASK}"]
        assert client.get("/fine").json() == {"echo": SECRET}  # not an error: the app's own answer
