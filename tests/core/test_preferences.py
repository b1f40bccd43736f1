"""The preference decisions, pure: who a recipient is, which opt-out matches, when a person's active hours
let a delivery go (with a route's own intervals: both must), and what critical kinds ignore."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from relay.config import Config
from relay.config.intervals import TimePeriodConfig
from relay.config.time_intervals import hold_until
from relay.preferences.model import (
    OptOut,
    Preference,
    PreferenceError,
    active_until,
    claim_of,
    from_stored,
    opted_out_why,
    validate,
)

pytestmark = pytest.mark.dated

FRIDAY_EVENING = datetime(2026, 11, 27, 17, 30, tzinfo=UTC).timestamp()  # 18:30 in Rome
MONDAY_8_ROME = datetime(2026, 11, 30, 7, 0, tzinfo=UTC).timestamp()
OFFICE = [
    {"weekdays": ["monday:friday"], "times": [{"start_time": "08:00", "end_time": "18:00"}], "location": "Europe/Rome"}
]


def _config(**extra: Any) -> Config:
    return Config.model_validate(
        {
            "channels": {"mail": {"url": "mailto://127.0.0.1:1?from=a@example.com", "per_recipient": True}},
            "routes": [{"channels": ["mail"]}],
            **extra,
        }
    )


KIND = "notification:access-control-request-failed"


def _never(_: datetime) -> datetime | None:
    return None


def test_a_person_is_their_user_ref_and_their_email_lower_cased_and_never_a_group() -> None:
    assert claim_of({"userRef": None, "spec": {"email": "Alice.Rossi@Example.COM"}}).people() == [
        "alice.rossi@example.com"
    ]
    assert claim_of({"userRef": "group:default/analytics"}).people() == []
    assert claim_of({"userRef": None, "spec.email": None}).people() == []


def test_a_recipient_claims_a_user_ref_and_an_address_and_a_user_ref_relay_cannot_key_is_no_person() -> None:
    claim = claim_of({"userRef": "user:default/alice.rossi", "spec.email": "Alice@Example.com"})
    assert claim.people() == ["user:default/alice.rossi", "alice@example.com"]
    for unusable in ("user:default/" + "a" * 320, "user:default/a\x07b", "user:default/a\nb"):
        claim = claim_of({"userRef": unusable, "spec.email": "carla@example.com"})
        assert claim.people() == ["carla@example.com"] and claim.unusable_ref
    assert claim_of({"userRef": "group:default/analytics", "spec.email": "team@example.com"}).people() == []
    assert claim_of({"userRef": None, "spec.email": "not an address"}).people() == []


def test_a_delivery_obeys_every_one_of_its_people() -> None:
    """Its userRef's and its address's preferences: either's opt-out skips it; it goes when both are in hours."""
    by_ref = Preference("user:default/a", [], OFFICE)
    evenings = [{"times": [{"start_time": "17:00", "end_time": "23:00"}], "location": "Europe/Rome"}]
    by_address = Preference("a@example.com", [OptOut("notification:y")], evenings)
    assert opted_out_why(_config(), [by_ref, by_address], "notification:y", "mail") is not None
    monday_17_rome = datetime(2026, 11, 30, 16, 0, tzinfo=UTC).timestamp()
    assert active_until(_config(), [by_ref, by_address], KIND, FRIDAY_EVENING, _never) == monday_17_rome
    assert opted_out_why(_config(), [], "notification:y", "mail") is None
    assert active_until(_config(), [], KIND, FRIDAY_EVENING, _never) is None


def test_an_opt_out_matches_by_kind_glob_with_or_without_prefix_and_by_channel() -> None:
    assert OptOut("notification:output-port-*", "mail").matches("notification:output-port-deprecated", "mail")
    assert OptOut("output-port-*").matches("notification:output-port-deprecated", "slack-dm")
    assert not OptOut("notification:output-port-*", "mail").matches("notification:output-port-x", "slack-dm")
    assert not OptOut("notification:x").matches("notification:xy", "mail")


def test_an_opted_out_delivery_is_skipped_with_a_reason_naming_the_preference() -> None:
    pref = Preference("user:default/a", [OptOut("notification:x", "requester-email")])
    found = opted_out_why(_config(), [pref], "notification:x", "requester-email")
    assert found == "opted out of notification:x on requester-email"
    assert opted_out_why(_config(), [pref], "notification:y", "requester-email") is None
    assert opted_out_why(_config(), [pref], "notification:x", "mail") is None


def test_outside_active_hours_a_delivery_is_held_until_they_open() -> None:
    pref = Preference("p", [], OFFICE)
    assert active_until(_config(), [pref], KIND, FRIDAY_EVENING, _never) == MONDAY_8_ROME
    inside = datetime(2026, 11, 27, 9, 0, tzinfo=UTC).timestamp()
    assert active_until(_config(), [pref], KIND, inside, _never) is None


def test_with_a_route_of_its_own_intervals_the_delivery_goes_when_both_let_it() -> None:
    # The route holds until Monday 12:00 UTC (later than the person's 07:00 UTC): the later wins.
    route_opens = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def route(at: datetime) -> datetime | None:
        return route_opens if at < route_opens else None

    office = [Preference("p", [], OFFICE)]
    assert active_until(_config(), office, KIND, FRIDAY_EVENING, route) == route_opens.timestamp()
    # The route lets it go at 19:00 UTC Monday, after the person's hours (18:00 Rome): Tuesday 08:00 Rome.
    late = datetime(2026, 11, 30, 19, 0, tzinfo=UTC)

    def evening_route(at: datetime) -> datetime | None:
        return late if at < late else None

    tuesday_8 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC).timestamp()
    assert active_until(_config(), office, KIND, FRIDAY_EVENING, evening_route) == tuesday_8


def test_critical_kinds_ignore_opt_outs_and_active_hours() -> None:
    config = _config(preferences={"critical_kinds": ["notification:security-*"]})
    pref = [Preference("p", [OptOut("*")], OFFICE)]
    assert opted_out_why(config, pref, "notification:security-breach", "mail") is None
    assert active_until(config, pref, "notification:security-breach", FRIDAY_EVENING, _never) is None
    assert opted_out_why(config, pref, "notification:other", "mail") == "opted out of * on every channel"
    assert active_until(config, pref, "notification:other", FRIDAY_EVENING, _never) == MONDAY_8_ROME


def test_validation_names_the_field_and_a_known_channel_is_required() -> None:
    with pytest.raises(PreferenceError) as bad:
        validate("p", {"optOuts": [{"kind": ""}]})
    assert bad.value.field == "optOuts.0.kind"
    with pytest.raises(PreferenceError) as unknown:
        validate("p", {"optOuts": [{"kind": "x", "channel": "nope"}]}, {"mail": object()})
    assert unknown.value.field == "optOuts.0.channel"
    with pytest.raises(PreferenceError) as hours:
        validate("p", {"activeHours": [{"times": [{"start_time": "18:00", "end_time": "08:00"}]}]})
    assert hours.value.field.startswith("activeHours.0.times.0")
    with pytest.raises(PreferenceError) as zone:
        validate("p", {"activeHours": [{"location": "Mars/Olympus"}]})
    assert zone.value.field == "activeHours.0.location"


def test_stored_preferences_read_back_the_same() -> None:
    pref = validate(
        "user:default/a", {"optOuts": [{"kind": "notification:x", "channel": "mail"}], "activeHours": OFFICE}
    )
    pref.updatedAt = 1234.5
    again = from_stored(pref.stored())
    assert again == pref
    # The hours compile to what the config's own time intervals are.
    hours = again.hours()
    assert hours is not None
    compiled = TimePeriodConfig.model_validate(OFFICE[0])
    assert hold_until(datetime.fromtimestamp(FRIDAY_EVENING, UTC), [hours], []) == datetime.fromtimestamp(
        MONDAY_8_ROME, UTC
    )
    assert compiled.location == "Europe/Rome"


def test_a_person_named_by_hand_is_keyed_as_planning_finds_them_and_a_group_is_refused() -> None:
    from relay.preferences.model import PreferenceError, check_person, validate

    assert check_person("Bob@Example.com") == "bob@example.com"  # planning looks e-mail addresses up lower-cased
    assert check_person("user:default/Alice.Rossi") == "user:default/Alice.Rossi"  # a userRef stays as it is
    assert validate("Bob@Example.COM", {"optOuts": []}).person == "bob@example.com"
    for group in ("group:default/analytics-team", "Group:default/x"):
        with pytest.raises(PreferenceError) as refused:
            check_person(group)
        assert refused.value.field == "person"
