"""The `relay` command in-process: safe bind, deliveries, replay, status, send errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.cli import main
from relay.cli.main import INVALID_CONFIG
from relay.runtime.bootstrap import Runtime
from tests.conftest import post, run_worker, sample_notification
from tests.servers import HttpSink, free_port


@pytest.fixture
def config_file(rt: Runtime, tmp_path: Path) -> Path:
    path = tmp_path / "cli-config.json"
    data = rt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})
    path.write_text(json.dumps(data))
    return path


def test_serve_refuses_an_open_address_without_auth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "open.yaml"
    path.write_text("server: {host: 0.0.0.0}\n")
    assert main(["serve", "--config", str(path)]) == INVALID_CONFIG
    assert "no webhook auth is configured" in capsys.readouterr().err


def test_invalid_config_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("routes:\n  - channels: [missing]\n")
    assert main(["status", "x", "--config", str(path)]) == INVALID_CONFIG
    assert "routes[0].channels[0]: unknown channel 'missing'" in capsys.readouterr().err


def test_deliveries_replay_and_status(
    client: TestClient, rt: Runtime, sink: HttpSink, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sink.script["/owners"] = [400, 400]
    payloads = [sample_notification() for _ in range(2)]
    for payload in payloads:
        post(client, payload)
    run_worker(rt)
    capsys.readouterr()

    assert main(["deliveries", "--state", "failed", "--config", str(config_file), "--json"]) == 0
    failed: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    assert [d["channel"] for d in failed] == ["owners-hook", "owners-hook"]
    # A page at a time: the cursor to go on from is said on stderr, and takes up where the page ended.
    assert main(["deliveries", "--state", "failed", "--limit", "1", "--config", str(config_file), "--json"]) == 0
    first = capsys.readouterr()
    cursor = first.err.split("--cursor ")[1].split()[0]
    assert main(["deliveries", "--state", "failed", "--cursor", cursor, "--config", str(config_file), "--json"]) == 0
    rest = capsys.readouterr()
    assert [d["id"] for d in json.loads(first.out) + json.loads(rest.out)] == [d["id"] for d in failed]
    assert "--cursor" not in rest.err

    assert main(["deliveries", "--state", "failed", "--config", str(config_file)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:3] == ["id", "eventId", "kind"]
    assert table.count("owners-hook") == 2

    event = payloads[0]["metadata"]["eventId"]
    assert main(["replay", "--event", event, "--dry-run", "--config", str(config_file)]) == 0
    assert "1 failed delivery would be replayed (dry run)" in capsys.readouterr().out
    assert rt.store.delivery(failed[0]["id"]) is not None

    assert main(["replay", "--channel", "owners-hook", "--config", str(config_file)]) == 0
    out = capsys.readouterr()
    assert "replayed 2 failed deliveries" in out.out and "2/2" in out.err
    run_worker(rt)
    assert len(sink.at("/owners")) == 2

    assert main(["status", event, "--config", str(config_file)]) == 0
    status = capsys.readouterr().out
    assert f"event {event}" in status and status.count("delivered") == 3

    assert main(["status", "no-such-event", "--config", str(config_file)]) == 1


def test_send_reports_an_unreachable_relay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = tmp_path / "p.json"
    payload.write_text(json.dumps(sample_notification()))
    url = f"http://127.0.0.1:{free_port()}/webhook"
    absent = str(tmp_path / "absent.yaml")
    assert main(["send", str(payload), "--url", url, "--config", absent]) == 1
    err = capsys.readouterr().err
    # Where it tried, that relay seems not to run there, and how to start it or point elsewhere.
    assert f"cannot reach relay at {url}" in err
    assert "relay does not seem to be running there" in err
    assert f"start it with `relay serve --config {absent}`, or give its address with --url" in err
    assert len(err.strip().splitlines()) == 1


def test_status_shows_each_address_and_the_redis_it_read(
    client: TestClient, rt: Runtime, sink: HttpSink, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payload = sample_notification()
    post(client, payload)
    run_worker(rt)
    capsys.readouterr()

    assert main(["status", payload["metadata"]["eventId"], "--config", str(config_file)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[1].split()
    assert header[:5] == ["id", "recipientType", "recipient", "address", "channel"]
    mail = next(line for line in lines if "requester-email" in line)
    assert "alice.rossi@example.com" in mail.split()
    url = rt.config.redis.url
    assert lines[-1] == f"redis {url}  (rq info -u {url})"

    assert main(["status", "no-such-event", "--config", str(config_file)]) == 1
    assert f"redis {url}" in capsys.readouterr().err

    # As JSON the answer is one document on stdout; the Redis line was missing, it now goes to stderr.
    assert main(["status", payload["metadata"]["eventId"], "--config", str(config_file), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["eventId"] == payload["metadata"]["eventId"]
    assert err.splitlines()[-1] == f"redis {url}  (rq info -u {url})"


def test_a_redis_password_is_never_shown() -> None:
    from relay.config.urls import masked_url

    assert masked_url("redis://:s3cret-pw@redis:6379/0") == "redis://:****@redis:6379/0"
    assert masked_url("rediss://relay:s3cret-pw@redis:6380/1") == "rediss://relay:****@redis:6380/1"
    assert masked_url("unix:///var/lib/relay/redis.sock") == "unix:///var/lib/relay/redis.sock"


def test_a_mistyped_command_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    from relay.cli.main import main as relay_main

    for argv, said in (
        (["statuss", "e1"], "relay: error: unknown command 'statuss'; did you mean `relay status`?"),
        (["frobnicate"], "the commands are: api, check, deliveries"),
    ):
        with pytest.raises(SystemExit) as done:
            relay_main(argv)
        assert done.value.code == 2 and said in capsys.readouterr().err


def test_one_delivery_whole_in_a_table_and_in_json(
    client: TestClient, rt: Runtime, sink: HttpSink, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 48: `relay delivery ID` shows what the API and the page show: every try and the message sent."""
    sink.script["/owners"] = [400]  # permanent: failed at its first try
    payload = sample_notification()
    post(client, payload)
    run_worker(rt)
    capsys.readouterr()
    assert main(["deliveries", "--state", "failed", "--config", str(config_file), "--json"]) == 0
    [failed] = json.loads(capsys.readouterr().out)
    assert main(["delivery", failed["id"], "--config", str(config_file), "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert whole["id"] == failed["id"] and whole["state"] == "failed"
    assert [t["outcome"] for t in whole["attemptLog"]] == ["permanent"] and whole["attemptLog"][0]["status"] == 400
    assert whole["message"] is not None and whole["message"]["title"]  # what the failed try sent
    assert main(["delivery", failed["id"], "--config", str(config_file)]) == 0
    shown = capsys.readouterr().out
    assert f"id:            {failed['id']}" in shown and "tries (the last 1 of 1):" in shown
    assert "permanent" in shown and "400" in shown and "message sent: " in shown
    assert main(["delivery", "dnosuch", "--config", str(config_file)]) == 1
    assert "no delivery with id 'dnosuch'" in capsys.readouterr().err
