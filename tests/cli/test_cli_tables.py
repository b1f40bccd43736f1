"""`relay status` and `relay deliveries` tables: the route column, digests marked, long errors cut with an
ellipsis (whole with --wide and --format json), and notBefore only on rows still held. Real Redis, RQ, sinks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.cli import main
from relay.cli.common import table
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.store import iso
from tests.conftest import post, run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink, free_port

OWNERS = "recipient-type:system-owner"


def config_file(rt: Runtime, tmp_path: Path) -> str:
    path = tmp_path / "cli-config.json"
    path.write_text(json.dumps(rt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 0
    return capsys.readouterr().out


def owners_only() -> dict[str, Any]:
    return sample_notification(messages=[sample_notification()["messages"][0]])


def accept(rt: Runtime, *payloads: dict[str, Any]) -> list[str]:
    with TestClient(create_app(rt)) as client:
        for payload in payloads:
            assert post(client, payload).status_code == 202
    run_worker(rt)
    return [str(p["metadata"]["eventId"]) for p in payloads]


def test_table_cells_are_cut_with_an_ellipsis_unless_wide() -> None:
    rows = [{"id": "d1", "lastError": "x" * 59 + "yz"}, {"id": "d2", "lastError": "first line\nsecond line"}]
    lines = table(rows, ["id", "lastError"]).splitlines()
    assert lines[1] == "d1  " + "x" * 59 + "…"
    assert lines[2] == "d2  first line second line"  # one line a row
    assert table(rows, ["id", "lastError"], wide=True).splitlines()[1] == "d1  " + "x" * 59 + "yz"


def test_control_characters_are_shown_escaped_never_sent_to_the_terminal() -> None:
    """A payload's or a silence's terminal escape sequence (a colour, a title, a cleared screen) reaches a table
    as text, escaped as the logs escape it: `relay deliveries`, `relay status` and `relay silence list` alike."""
    out = table(
        [{"kind": "notification:\x1b]0;pwned\x07\x1b[2J", "comment": "a\u2028b\x9bc"}], ["kind", "comment"], wide=True
    )
    assert "\x1b" not in out and "\x07" not in out and "\u2028" not in out and "\x9b" not in out
    assert "notification:\\u001b]0;pwned\\u0007\\u001b[2J" in out and "a b\\u009bc" in out  # U+2028 is white space


def test_a_long_error_is_cut_in_the_table_and_whole_with_wide_or_json(
    make_runtime: Callable[..., Runtime], sink: HttpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"json://127.0.0.1:{free_port()}/gone"  # nothing listens: a connection error, longer than a cell
    rt = make_runtime(
        channels={"dead-hook": {"url": dead}},
        routes=[{"name": "doomed", "recipient_types": [OWNERS], "channels": ["dead-hook"]}],
        default={"channels": []},
        retry={"attempts": 1, "backoff": ["1s"]},
    )
    [event] = accept(rt, owners_only())
    [record] = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event)) if r]
    error = record.lastError or ""
    assert record.state == "failed" and len(error) > 60
    config = config_file(rt, tmp_path)

    for command in (["deliveries", "--state", "failed"], ["status", event]):
        out = run(capsys, *command, "--config", config)
        header, line = out.splitlines()[1 if command[0] == "status" else 0 :][:2]
        assert header.split()[header.split().index("channel") + 1] == "route"
        assert "doomed" in line.split()
        assert error[:59] + "…" in line and error not in out
        wide = run(capsys, *command, "--config", config, "--wide")
        assert error in wide and "…" not in wide
        for as_json in (["--format", "json"], ["--json"]):
            printed = json.loads(run(capsys, *command, "--config", config, *as_json))
            listed = printed if isinstance(printed, list) else printed["deliveries"]
            assert [(d["lastError"], d["route"]) for d in listed] == [(error, "doomed")]


def test_digests_are_marked_and_only_held_rows_show_not_before(
    make_runtime: Callable[..., Runtime], sink: HttpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rt = make_runtime(
        routes=[{"name": "gathered", "recipient_types": [OWNERS], "channels": ["owners-hook"], "digest": "15m"}],
        default={"channels": []},
    )
    events = accept(rt, owners_only(), owners_only())
    found = [r for e in events for r in rt.store.deliveries(rt.store.event_delivery_ids(e)) if r]
    [digest] = [r for r in found if r.items]  # named by the item gathered first (sender threads race for it)
    [item] = [r for r in found if r.digest and r.eventId != digest.eventId]
    first = digest.eventId
    assert digest.notBefore is not None
    config = config_file(rt, tmp_path)

    held = run(capsys, "deliveries", "--config", config, "--wide").splitlines()
    columns = held[0].split()
    assert columns[columns.index("state") + 1] == "digest" and columns[-1] == "notBefore"
    digest_line = next(line for line in held if line.startswith(digest.id))
    assert "digest of 2" in digest_line and "held" in digest_line.split()
    item_line = next(line for line in held if line.startswith(item.id))
    assert f"in {digest.id}" in item_line
    assert all(line.endswith(iso(digest.notBefore)) for line in held[1:])  # each held row: its notBefore

    run_scheduled(rt)  # the window ends now
    run_worker(rt)
    delivered = run(capsys, "deliveries", "--config", config, "--wide")
    assert delivered.count("delivered") == 3 and "held" not in delivered
    assert "notBefore" not in delivered  # the records keep it; the table shows it only while held
    status = run(capsys, "status", first, "--config", config).splitlines()
    assert "digest" in status[1].split() and "notBefore" not in status[1]
    assert "digest of 2" in next(line for line in status if line.startswith(digest.id))
    # --format json prints the records as the admin API does: a record keeps the notBefore it was held until.
    records = json.loads(run(capsys, "status", first, "--config", config, "--format", "json"))["deliveries"]
    assert {d["state"] for d in records} == {"delivered"} and all("notBefore" in d for d in records)


def test_a_retrying_delivery_shows_when_it_is_tried_next(
    rt: Runtime, sink: HttpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 48: `relay status` and `relay deliveries` say when a `retrying` delivery is tried next (the work
    queue's due time: the record does not keep it), and the column goes once none is retrying."""
    sink.script["/owners"] = [503]
    [event] = accept(rt, owners_only())
    [record] = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event)) if r]
    assert record.state == "retrying"
    due = rt.store.leases.due_times([record.id])[record.id]
    config = config_file(rt, tmp_path)
    status = run(capsys, "status", event, "--config", config, "--wide").splitlines()
    assert status[1].split()[-1] == "nextAttemptAt" and status[2].endswith(iso(due))
    listed = run(capsys, "deliveries", "--config", config, "--wide").splitlines()
    assert listed[0].split()[-1] == "nextAttemptAt" and listed[1].endswith(iso(due))
    [shown] = json.loads(run(capsys, "status", event, "--config", config, "--format", "json"))["deliveries"]
    assert shown["nextAttemptAt"] == iso(due)
    run_scheduled(rt)
    run_worker(rt)
    assert "nextAttemptAt" not in run(capsys, "status", event, "--config", config, "--wide")
