"""A person's active hours that hold a delivery longer than `retention` say so: the admin API's answer has
`warnings`, `relay prefs import` and `relay prefs show` a line (issue 45). Real Redis; the runtime's clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from relay.cli import main
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import admin

pytestmark = pytest.mark.dated

ALICE = "user:default/alice.rossi"
PATH = f"/api/v1/people/{quote(ALICE, safe='')}/preferences"
FRIDAY_EVENING = datetime(2026, 11, 27, 17, 30, tzinfo=UTC).timestamp()
WEDNESDAY_NOON = datetime(2026, 11, 25, 12, 0, tzinfo=UTC).timestamp()  # open then
OFFICE = [{"weekdays": ["monday:friday"], "times": [{"start_time": "08:00", "end_time": "18:00"}]}]
GONE = [{"years": ["2020"]}]  # never again: a delivery it holds waits for ever
NOTE = "kept past retention"


def test_the_admin_api_warns_of_hours_that_hold_past_retention(make_runtime: Callable[..., Runtime]) -> None:
    rt = make_runtime(retention="3d")
    rt.clock.set(FRIDAY_EVENING)
    with TestClient(create_app(rt)) as client:
        office = admin(client, PATH, "PUT", json={"activeHours": OFFICE})
        assert office.status_code == 200 and office.json()["warnings"] == []  # closed 62 h at most: a weekend
        gone = admin(client, PATH, "PUT", json={"activeHours": GONE})
        assert gone.status_code == 200
        [warning] = gone.json()["warnings"]
        assert NOTE in warning and "(3d)" in warning
        assert "warnings" not in admin(client, PATH).json()  # the answer to the change only
    # With a retention of 2 days, the weekend (Friday 18:00 to Monday 08:00) outlasts it, whenever it is put.
    rt = make_runtime(retention="2d")
    rt.clock.set(WEDNESDAY_NOON)
    with TestClient(create_app(rt)) as client:
        assert NOTE in admin(client, PATH, "PUT", json={"activeHours": OFFICE}).json()["warnings"][0]


def test_import_and_show_say_so_in_a_line(
    make_runtime: Callable[..., Runtime], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rt = make_runtime()
    config = tmp_path / "prefs-config.json"
    config.write_text(json.dumps(rt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    dump = tmp_path / "prefs.json"
    people = [
        {"person": ALICE, "optOuts": [], "activeHours": GONE},
        {"person": "carla@example.com", "optOuts": [], "activeHours": None},
    ]
    dump.write_text(json.dumps({"version": 1, "preferences": people}))
    assert main(["prefs", "import", str(dump), "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    assert "imported the preferences of 2 people" in out
    [line] = err.splitlines()
    assert line.startswith(f"relay prefs: {ALICE}: ") and NOTE in line
    assert main(["prefs", "show", ALICE, "--config", str(config)]) == 0
    assert NOTE in capsys.readouterr().err
    assert main(["prefs", "show", "carla@example.com", "--config", str(config)]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "hours",
    [
        [{"times": [{"start_time": "\u0660\u0668:\u0660\u0660", "end_time": "18:00"}]}],  # Arabic-Indic digits
        [{"weekdays": ["monday"], "location": "Factory"}],  # no place's time: the page refuses it too
        [{"years": ["99999"]}],
    ],
)
def test_hours_no_reader_could_show_are_refused(make_runtime: Callable[..., Runtime], hours: object) -> None:
    with TestClient(create_app(make_runtime())) as client:
        answer = admin(client, PATH, "PUT", json={"activeHours": hours})
        assert answer.status_code == 422, answer.text
        assert not admin(client, PATH).json()["activeHours"]  # nothing stored
