""" "Now", for work that other machines take, is the earlier of the writer's clock and Redis's: a release or a
replay from a CLI whose clock runs ahead is sent at once by workers whose clocks agree with Redis's."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from relay.cli import main
from relay.core.clock import system_clock
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.clock import ManualClock
from tests.conftest import admin, post, run_worker, sample_notification
from tests.servers import HttpSink


def test_a_release_from_a_cli_whose_clock_runs_ahead_is_sent_at_once(
    make_runtime: Callable[..., Runtime], sink: HttpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rt = make_runtime(clock=ManualClock(time.time(), base=system_clock))  # the workers' clock: the wall's
    payload = sample_notification()
    with TestClient(create_app(rt)) as api:
        body = {"matchers": ['channel="owners-hook"'], "duration": "1h", "createdBy": "ana", "comment": "db move"}
        assert admin(api, "/api/v1/silences", "POST", json=body).status_code == 201
        assert post(api, payload).status_code == 202
        run_worker(rt)
        deliveries = admin(api, f"/api/v1/events/{payload['metadata']['eventId']}").json()["deliveries"]
    assert {d["channel"]: d["state"] for d in deliveries}["owners-hook"] == "held"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(rt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    ahead = ManualClock(time.time() + 600, base=system_clock)  # the CLI's machine: ten minutes ahead
    assert main(["release", "--channel", "owners-hook", "--config", str(config)], clock=ahead) == 0
    assert "released 1 held delivery" in capsys.readouterr().out
    run_worker(rt)
    assert len(sink.at("/owners")) == 1
