"""`relay silence add|list|expire` in process, on the test's Redis: what it adds holds (or skips) deliveries,
expiring it lets them go; bad input names what is wrong and adds nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from relay.cli import main
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.silences.store import SILENCES
from tests.cli.test_cli import config_file as config_file  # the fixture: the runtime's config as a file
from tests.conftest import admin, post, run_worker, sample_notification
from tests.servers import HttpSink

pytestmark = pytest.mark.dated


def _listed(config: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, str]]:
    capsys.readouterr()
    assert main(["silence", "list", "--json", "--config", str(config), *extra]) == 0
    return list(json.loads(capsys.readouterr().out))


def test_add_holds_list_shows_expire_releases(
    rt: Runtime, sink: HttpSink, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(config_file)
    add = ["silence", "add", 'channel="owners-hook"', "kind=~notification:access-.*", "--for", "2h"]
    assert main([*add, "--comment", "db move", "--by", "ana", "--config", config]) == 0
    out = capsys.readouterr().out
    assert out.startswith("silence ") and " active: holds " in out
    [silence] = _listed(config_file, capsys)
    assert (silence["createdBy"], silence["comment"], silence["action"]) == ("ana", "db move", "hold")
    with TestClient(create_app(rt)) as client:
        payload = sample_notification()
        assert post(client, payload).status_code == 202
        run_worker(rt)
        held = admin(client, "/api/v1/deliveries?state=held").json()
        assert [d["lastError"] for d in held] == [f"silenced by {silence['id']} (ana): db move"]
        assert sink.at("/owners") == []
        assert main(["silence", "list", "--config", config]) == 0
        table = capsys.readouterr().out
        assert silence["id"] in table and "db move" in table
        assert main(["silence", "expire", silence["id"], "--config", config]) == 0
        assert "1 held delivery goes out now" in capsys.readouterr().out
        run_worker(rt)
        assert len(sink.at("/owners")) == 1
    assert _listed(config_file, capsys) == []
    assert [s["state"] for s in _listed(config_file, capsys, "--all")] == ["expired"]
    assert main(["silence", "expire", "no-such-id", "--config", config]) == 1


def test_skip_and_until(rt: Runtime, config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(config_file)
    args = ["silence", "add", 'channel="audit-hook"', "--until", "2999-01-01T00:00:00Z", "--comment", "x", "--skip"]
    assert main([*args, "--config", config]) == 0
    [silence] = _listed(config_file, capsys)
    assert silence["action"] == "skip" and silence["endsAt"] == "2999-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (['nope="x"', "--for", "1h"], "matchers"),
        (['kind="x"', "--for", "soon"], "duration"),
        (['kind="x"', "--until", "2001-01-01T00:00:00Z"], "endsAt is in the past"),
    ],
)
def test_bad_input_adds_nothing(
    rt: Runtime, config_file: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    assert main(["silence", "add", *args, "--comment", "c", "--config", str(config_file)]) == 2
    assert said in capsys.readouterr().err
    assert _listed(config_file, capsys, "--all") == []


def test_preview_says_which_silence_would_hold_or_skip(
    rt: Runtime, config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(config_file)
    hold = ["silence", "add", 'channel="owners-hook"', "--for", "1h", "--comment", "db move", "--by", "ana"]
    skip = ["silence", "add", 'channel="managers-hook"', "--for", "1h", "--comment", "noisy", "--skip"]
    assert main([*hold, "--config", config]) == 0 and main([*skip, "--config", config]) == 0
    held, skipped = (s["id"] for s in _listed(config_file, capsys))
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(sample_notification()))
    assert main(["preview", str(payload), "--format", "json", "--config", config]) == 0
    plan = {d["channel"]: d for d in json.loads(capsys.readouterr().out)["deliveries"]}
    assert (
        plan["owners-hook"]["state"] == "held" and plan["owners-hook"]["heldBy"] == f"silenced by {held} (ana): db move"
    )
    assert (
        plan["managers-hook"]["state"] == "skipped"
        and plan["managers-hook"]["reason"] == f"silenced by {skipped}: noisy"
    )
    assert plan["requester-email"]["state"] == "would send"
    assert main(["preview", str(payload), "--config", config]) == 0
    assert f"(silenced by {held} (ana): db move)" in capsys.readouterr().out
    # Past the silences' end (--at), nothing is held.
    assert main(["preview", str(payload), "--format", "json", "--at", "2999-01-01T00:00:00Z", "--config", config]) == 0
    assert {d["state"] for d in json.loads(capsys.readouterr().out)["deliveries"]} == {"would send"}


@pytest.mark.parametrize(
    ("when", "field"),
    [
        (["--for", "1h", "--start", "0001-01-01T00:00:00+05:00"], "startsAt"),  # the year 0 once in UTC
        (["--until", "9999-12-31T23:59:59-01:00"], "endsAt"),  # the year 10000 in UTC
        (["--until", "tomorrow"], "endsAt"),
    ],
)
def test_a_time_no_reader_could_show_is_refused_in_one_line(
    rt: Runtime, config_file: Path, capsys: pytest.CaptureFixture[str], when: list[str], field: str
) -> None:
    args = ["silence", "add", 'kind="x"', *when, "--comment", "c", "--config", str(config_file)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"relay: silence not added: {field}: "), err
    assert _listed(config_file, capsys, "--all") == []


def test_list_and_expire_leave_an_unreadable_silence_out(
    rt: Runtime, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(config_file)
    assert main(["silence", "add", 'kind="x"', "--for", "1h", "--comment", "c", "--config", config]) == 0
    zero = {"id": "zero", "matchers": ['kind="x"'], "startsAt": -62135683140.0, "endsAt": 4e9, "createdBy": "x"}
    rt.redis.hset(SILENCES, mapping={"zero": json.dumps(zero), "junk": "{not json"})
    assert [s["comment"] for s in _listed(config_file, capsys, "--all")] == ["c"]
    assert main(["silence", "list", "--config", config]) == 0
    assert "zero" not in capsys.readouterr().out
    for ident in ("zero", "junk"):
        assert main(["silence", "expire", ident, "--config", config]) == 1
        assert f"no readable silence with id {ident!r}" in capsys.readouterr().err


def test_a_hold_past_retention_says_so(rt: Runtime, config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["silence", "add", 'kind="x"', "--comment", "c", "--config", str(config_file)]
    assert main([*args, "--for", "2h"]) == 0
    assert capsys.readouterr().err == ""
    assert main([*args, "--for", "40d"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kept past retention (30d) until it ends" in err
