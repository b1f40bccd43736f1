"""The `time_intervals` section and routes' active/mute intervals: what `relay check` accepts and refuses,
each problem with its key path and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.config import read_config

pytestmark = pytest.mark.dated

GOOD = """
channels:
  mail: {url: "json://localhost:9/x"}
time_intervals:
  - name: office-hours
    time_intervals:
      - weekdays: ["monday:friday"]
        times: [{start_time: 08:00, end_time: 18:00}]   # unquoted: YAML 1.1 reads 18:00 as 1080
        location: Europe/Rome
  - name: change-freeze
    time_intervals:
      - months: [december]
        days_of_month: ["24:26", -1]
        years: [2026]
routes:
  - channels: [mail]
    active_time_intervals: [office-hours]
    mute_time_intervals: [change-freeze]
"""


def read(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return read_config(path, environ={}).problems


def test_intervals_compile_and_routes_name_them(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(GOOD)
    config = read_config(path, environ={}).config
    assert config is not None
    [office] = config.intervals(config.routes[0].active_time_intervals)
    period = office.periods[0]
    assert (period.times[0].start, period.times[0].end) == (8 * 60, 18 * 60)
    assert str(period.location) == "Europe/Rome"
    assert [i.name for i in config.intervals(config.routes[0].mute_time_intervals)] == ["change-freeze"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            ("end_time: 18:00", "end_time: 25:61"),
            "time_intervals[0].time_intervals[0].times[0].end_time: '25:61' is not a time of day",
        ),
        (("start_time: 08:00", 'start_time: "8:00"'), "times[0].start_time: '8:00' is not a time of day as HH:MM"),
        (("start_time: 08:00", "start_time: 19:00"), "times[0]: start_time '19:00' is not before end_time '18:00'"),
        (("location: Europe/Rome", "location: Europe/Atlantis"), "[0].location: 'Europe/Atlantis' is not a known"),
        (('["monday:friday"]', '["friday:monday"]'), "weekdays[0]: 'friday:monday': the first day comes after"),
        (("months: [december]", "months: [decembre]"), "time_intervals[1].time_intervals[0].months[0]: 'decembre'"),
        (('["24:26", -1]', '["24:26", 0]'), "days_of_month[1]: 0 is not a day of month"),
        (('["24:26", -1]', "[1:5]"), "days_of_month[0]: 65 is not a day of month"),
        (
            ("active_time_intervals: [office-hours]", "active_time_intervals: [office]"),
            "routes[0].active_time_intervals[0]: unknown time interval 'office'",
        ),
        (
            ("mute_time_intervals: [change-freeze]", "mute_time_intervals: [change-freeze, x]"),
            "routes[0].mute_time_intervals[1]: unknown time interval 'x'",
        ),
        (("name: change-freeze", "name: office-hours"), "time_intervals[1].name: another interval is also named"),
        (
            ("location: Europe/Rome", "zone: Europe/Rome"),
            "time_intervals[0].time_intervals[0].zone: unknown key; the keys here are: times, weekdays,"
            " days_of_month, months, years, location",
        ),
    ],
)
def test_refused_naming_the_key_and_value(tmp_path: Path, change: tuple[str, str], problem: str) -> None:
    assert change[0] in GOOD
    problems = read(tmp_path, GOOD.replace(change[0], change[1], 1))
    assert any(problem in p for p in problems), problems


def test_unknown_interval_found_when_other_keys_are_wrong_too(tmp_path: Path) -> None:
    text = GOOD.replace("active_time_intervals: [office-hours]", "active_time_intervals: [nope]")
    problems = read(tmp_path, text.replace("end_time: 18:00", "end_time: 99:00"))
    assert any("routes[0].active_time_intervals[0]: unknown time interval 'nope'" in p for p in problems)
    assert any("end_time: '99:00'" in p for p in problems)


def test_model_validation_alone_refuses_an_unknown_interval() -> None:
    from pydantic import ValidationError

    from relay.config import Config

    with pytest.raises(ValidationError, match="unknown time interval 'quiet'"):
        Config.model_validate(
            {
                "channels": {"m": {"url": "json://localhost/x"}},
                "routes": [{"channels": ["m"], "mute_time_intervals": ["quiet"]}],
            }
        )


def test_relay_check_warns_of_intervals_that_never_open_and_notes_when_others_do(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from relay.cli.checks import check_intervals

    text = GOOD.replace("years: [2026]", "years: [2020]").replace(
        "    mute_time_intervals: [change-freeze]\n",
        "    mute_time_intervals: [change-freeze]\n  - name: never\n    channels: [mail]\n"
        "    active_time_intervals: [change-freeze]\n",
    )
    path = tmp_path / "config.yaml"
    path.write_text(text)
    config = read_config(path, environ={}).config
    assert config is not None
    friday_evening = datetime(2026, 11, 27, 17, 30, tzinfo=UTC)
    warnings, notes = check_intervals(config, friday_evening)
    assert warnings == ["never: its time intervals never let a delivery go: each one would be held until it expires"]
    assert notes == ["routes[0]: a delivery planned now is held until 2026-11-30T07:00:00Z"]
    assert check_intervals(config, datetime(2026, 11, 30, 9, 0, tzinfo=UTC))[1] == [
        "routes[0]: its time intervals let deliveries go now"
    ]


def test_relay_check_refuses_a_digest_window_under_a_second_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "digest.yaml"
    path.write_text(
        "channels: {a: {url: 'json://localhost/x'}}\n"
        "routes:\n"
        "  - {channels: [a], digest: 500ms}\n"
        "  - {channels: [a], digest: {window: 0s}}\n"
        "  - {channels: [a], digest: {window: 5m, max_items: 0}}\n"
        "  - {channels: [a], digest: {window: 5m, every: 3}}\n"
        "  - {channels: [a], digest: 15m}\n"
        "  - {channels: [a], digest: {window: 1s, max_items: 1000}}\n"
    )
    found = read_config(path, environ={})
    assert found.problems == [
        "routes[0].digest.window: a digest window must be at least 1s, not 0.5s",
        "routes[1].digest.window: a digest window must be at least 1s, not 0s",
        "routes[2].digest.max_items: must be at least 1 (it is 0)",
        "routes[3].digest.every: unknown key; the keys here are: window, max_items, key",
    ]
    path.write_text(
        "channels: {a: {url: 'json://localhost/x'}}\nroutes:\n  - {channels: [a], digest: 15m}\n"
        "  - {channels: [a], digest: {window: 1s, max_items: 1000}}\n"
    )
    config = read_config(path, environ={}).config
    assert config is not None
    assert [(r.digest.window, r.digest.max_items) for r in config.routes if r.digest] == [(900.0, 50), (1.0, 1000)]
