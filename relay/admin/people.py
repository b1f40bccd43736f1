"""The admin API of people's preferences: read or replace one person's; a signed link to their page."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from redis import Redis
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from typing_extensions import TypedDict

from relay.admin.access import json_object
from relay.admin.api import IsoTime
from relay.config import Config
from relay.preferences.model import Preference, PreferenceError, PreferenceModel, canonical_person, validate
from relay.preferences.store import Preferences
from relay.storage.store import iso
from relay.web.errors import error_response
from relay.web.links import preferences_url
from relay.web.operation import Answer, Operation

log = logging.getLogger("relay.admin.people")
MAX_BODY = 64 * 1024


class OptOutBody(TypedDict):
    kind: str
    channel: str


class PreferenceBody(TypedDict):
    """One person's preferences."""

    person: str
    optOuts: list[OptOutBody]
    activeHours: list[dict[str, Any]] | None  # Alertmanager time-interval periods, or null: any time
    updatedAt: IsoTime | None


class PreferenceChange(PreferenceBody):
    """The preferences as stored, and what the change should tell (active hours closed longer than retention)."""

    warnings: list[str]


class PreferenceLink(TypedDict):
    preferencesUrl: str


# 404: a person holding a line break names no route (a path parameter stops at one); no userRef or address does.
PERSON_ERRORS = (401, 404, 429, 503)


def _person(request: Request) -> str:
    return canonical_person(str(request.path_params["person"]))


class PeopleApi:
    def __init__(self, redis: Redis, settings: Callable[[], Config], clock: Callable[[], float]) -> None:
        self.store = Preferences(redis)
        self.settings = settings
        self.clock = clock

    @Operation(
        "One person's preferences (`person`: a userRef or an e-mail address, URL-encoded)",
        {200: Answer("The preferences (none set: no opt-outs, any time)", PreferenceBody)},
        errors=PERSON_ERRORS,
        tags=("people",),
    )
    async def get(self, request: Request) -> Response:
        person = _person(request)
        pref = await run_in_threadpool(self.store.get, person)
        return JSONResponse((pref or Preference(person)).public(iso))

    @Operation(
        "Replace one person's preferences",
        {200: Answer("The preferences as stored, with `warnings`", PreferenceChange)},
        errors=(*PERSON_ERRORS, 413, 415, 422),
        request=PreferenceModel,
        tags=("people",),
    )
    async def put(self, request: Request) -> Response:
        person = _person(request)
        data = await json_object(request, "preferences", MAX_BODY, solution="Send the preferences as a JSON object.")
        data.pop("person", None)  # as GET answers it: the path names the person
        data.pop("updatedAt", None)
        try:
            pref = validate(person, data, self.settings().channels)
        except PreferenceError as exc:
            return error_response(
                422,
                [str(exc)],
                f"The preferences cannot be stored: {exc}",
                field=exc.field or None,
                solutions=["Fix the field named and send them again."],
            )
        now = self.clock()
        stored = await run_in_threadpool(self.store.put, pref, now)
        log.info("preferences replaced through the admin API")
        warned = await run_in_threadpool(stored.past_retention, now, self.settings().retention)
        return JSONResponse({**stored.public(iso), "warnings": [warned] if warned else []})

    @Operation(
        "A signed link to one person's preference page, for a support desk",
        {200: Answer("The link", PreferenceLink)},
        errors=(401, 404, 409, 429),
        tags=("people",),
    )
    async def link(self, request: Request) -> Response:
        url = preferences_url(self.settings().preferences, _person(request), self.clock())
        if url is None:
            return error_response(
                409,
                ["preferences.public_url is not configured"],
                "relay makes no links without a public URL.",
                field="preferences.public_url",
                solutions=["Set preferences.public_url and preferences.secret, then reload."],
            )
        return JSONResponse({"preferencesUrl": url})
