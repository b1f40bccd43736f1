"""The silence decision (relay.silences.model): pure, the time given."""

from __future__ import annotations

import json

import pytest

from relay.config.matchers import MatcherError
from relay.core.model import Delivery
from relay.silences.model import (
    Silence,
    compile_matchers,
    delivery_view,
    holder,
    reads_notification,
    silenced,
)

pytestmark = pytest.mark.dated

T = 1_800_000_000.0


def _silence(
    *matchers: str, ident: str = "s1", start: float = T, end: float = T + 3600, action: str = "hold"
) -> Silence:
    return Silence(ident, matchers, start, end, "ops", "db migration", action)  # type: ignore[arg-type]


def _delivery(channel: str = "owners-slack", kind: str = "notification:quality-check-failed") -> Delivery:
    return Delivery("d1", "e1", kind, 0, channel, "auto", 3, T, T, recipientType="recipient-type:system-owner")


VIEW = delivery_view({"body": {"dataset": {"name": "sales"}}, "sender": "platform"}, _delivery())


def test_states_over_time() -> None:
    s = _silence('kind="x"')
    assert [s.state(t) for t in (T - 1, T, T + 3599, T + 3600)] == ["pending", "active", "active", "expired"]


def test_all_matchers_must_match_and_read_the_delivery_and_the_notification() -> None:
    both = _silence('kind=~"notification:quality-.*"', 'channel="owners-slack"')
    assert silenced([both], VIEW, T) is not None
    other = _silence('kind=~"notification:quality-.*"', 'channel="teams"')
    assert silenced([other], VIEW, T) is None
    assert silenced([_silence('body.dataset.name="sales"', 'recipientType="recipient-type:system-owner"')], VIEW, T)
    assert silenced([_silence('body.dataset.name="hr"')], VIEW, T) is None


def test_only_while_active() -> None:
    s = _silence('channel="owners-slack"')
    assert silenced([s], VIEW, T - 1) is None
    assert silenced([s], VIEW, T + 3600) is None


def test_a_skip_wins_and_among_holds_the_one_ending_last() -> None:
    short, long = _silence('kind!=""', ident="a", end=T + 60), _silence('kind!=""', ident="b", end=T + 7200)
    hit = silenced([short, long], VIEW, T)
    assert hit is not None and not hit.skip and hit.until == T + 7200 and hit.silence.id == "b"
    skip = _silence('kind!=""', ident="c", action="skip")
    hit = silenced([short, skip, long], VIEW, T)
    assert hit is not None and hit.skip and hit.reason == "silenced by c: db migration"


def test_a_hold_lasts_until_the_end_and_its_reason_says_who_and_why() -> None:
    hit = silenced([_silence('kind!=""')], VIEW, T)
    assert hit is not None and (hit.skip, hit.until) == (False, T + 3600)
    assert hit.reason == "silenced by s1 (ops): db migration"
    assert holder(hit.reason) == "s1"
    hit = silenced([_silence('kind!=""', action="skip")], VIEW, T)
    assert hit is not None and hit.skip and hit.reason == "silenced by s1: db migration"
    assert holder(hit.reason) == "s1" and holder("timeout") is None and holder(None) is None


def test_matchers_take_the_routes_syntax_plus_the_delivery_names() -> None:
    assert [m.path for m in compile_matchers(['channel="a", recipientType=~"r.*"', "body.x.y=1"])] == [
        ("channel",),
        ("recipientType",),
        ("body", "x", "y"),
    ]
    with pytest.raises(MatcherError, match="channel is a plain string"):
        compile_matchers(['channel.x="a"'])
    with pytest.raises(MatcherError, match="not valid"):
        compile_matchers(['kind=~"("'])
    assert not reads_notification([_silence('channel="a"', 'kind="b"')])
    assert reads_notification([_silence('channel="a"', 'sender="p"')])


def test_round_trip_and_early_end() -> None:
    s = _silence('kind="x"', action="skip")
    assert Silence.from_json(s.to_json()) == s
    ended = s.ended(T + 10)
    assert ended.state(T + 10) == "expired" and ended.startsAt == T
    never = s.ended(T - 100)  # a pending one expired: it never began
    assert never.startsAt == never.endsAt == T - 100
    assert s.public(T)["startsAt"] == "2027-01-15T08:00:00.000Z" and s.public(T)["state"] == "active"


@pytest.mark.parametrize(
    "stored",
    [
        {"startsAt": -62135683140.0},  # the year 0 in UTC
        {"endsAt": 1e300},
        {"endsAt": float("nan")},
        {"endsAt": T - 1},  # ends before it starts
        {"matchers": []},  # would silence everything
        {"matchers": ["{}"]},
        {"matchers": ['nope="x"']},
        {"matchers": 'kind="x"'},
        {"action": "drop"},
    ],
)
def test_a_stored_silence_no_reader_could_use_is_refused(stored: dict[str, object]) -> None:
    fine = {"id": "s1", "matchers": ['kind="x"'], "startsAt": T, "endsAt": T + 60, "createdBy": "a", "comment": "c"}
    assert Silence.from_json(json.dumps(fine)).endsAt == T + 60
    with pytest.raises(ValueError):
        Silence.from_json(json.dumps({**fine, **stored}))
