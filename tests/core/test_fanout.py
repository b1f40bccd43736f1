"""relay.core.fanout: the deliveries a notification plans, counted from the routes as the intake does; never
fewer than planning makes."""

from __future__ import annotations

from typing import Any

import pytest

from relay.core.fanout import deliveries_per_message
from relay.core.model import Notification
from relay.core.routing import plan_notification
from tests.core.test_routing import KIND, MANAGER, OWNER, REQUESTER, config, recipient, route


def _notification(*messages: dict[str, Any]) -> Notification:
    return Notification.model_validate(
        {"kind": KIND, "sender": "platform", "body": {}, "messages": list(messages), "metadata": {"eventId": "e"}}
    )


def _message(rtype: str, *emails: str | None) -> dict[str, Any]:
    return {"recipientType": rtype, "recipients": [recipient(e) for e in emails]}


ROUTES = config(
    route(recipient_types=[OWNER], channels=["slack", "email"], **{"continue": True}),
    route(recipient_types=[OWNER], channels=["email", "hook"]),  # email again: once
    route(recipient_types=[REQUESTER], channels=["email", "email2"]),
    default=["teams"],
)


@pytest.mark.parametrize(
    ("messages", "counts"),
    [
        ([_message(OWNER, "a@example.com", "b@example.com")], [1 + 2 + 1]),  # slack, email x2, hook
        ([_message(REQUESTER, "a@example.com", None, "c@example.com")], [3 + 3]),  # skipped ones count too
        ([_message(MANAGER, "a@example.com")], [1]),  # the default route: teams
        ([_message(OWNER), _message(REQUESTER)], [2, 0]),  # no recipients listed
    ],
)
def test_each_routed_channel_counts_once_and_a_per_recipient_one_per_recipient(
    messages: list[dict[str, Any]], counts: list[int]
) -> None:
    notification = _notification(*messages)
    assert deliveries_per_message(ROUTES, notification) == counts
    assert len(plan_notification(ROUTES, notification, "e", 0.0)) == sum(counts)


def test_a_recipient_listed_twice_counts_twice_and_is_planned_once() -> None:
    notification = _notification(_message(REQUESTER, "a@example.com", "A@example.com"))
    assert deliveries_per_message(ROUTES, notification) == [4]
    assert len(plan_notification(ROUTES, notification, "e", 0.0)) == 2
