"""Config reload: POST /api/v1/reload (and SIGHUP) swap routes, channels and tokens without dropping work."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from relay.config import load_config
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build, reload_runtime
from relay.runtime.worker import _forget, _heartbeat
from relay.storage.generations import CONFIG_APPLIED, CONFIG_GENERATION
from tests.conftest import ADMIN_TOKEN, WEBHOOK_TOKEN, base_config, post, run_worker, sample_notification
from tests.servers import HttpSink, SmtpSink, wait_for


def _runtime(tmp_path: Path, redis_url: str, redis: Any, data: dict[str, Any]) -> Runtime:
    path = tmp_path / "relay.json"
    path.write_text(json.dumps(data))
    return build(load_config(path), redis, config_file=path)


def test_reload_swaps_routes_and_tokens_and_refuses_a_broken_file(
    redis: Any, redis_server: Any, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    data = base_config(sink, smtp, tmp_path, redis_server.url).model_dump(
        mode="json", by_alias=True, exclude={"base_dir"}
    )
    data["routes"] = [{"channels": ["owners-hook"]}]
    rt = _runtime(tmp_path, redis_server.url, redis, data)
    path = rt.config_file
    assert path is not None
    with TestClient(create_app(rt)) as client:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        post(client, sample_notification())
        run_worker(rt)
        assert len(sink.at("/owners")) == 3 and sink.at("/audit") == []

        data["routes"] = [{"channels": ["audit-hook"]}]
        data["server"]["admin_tokens"] = ["rotated-admin-token-42"]
        data["server"]["port"] = 9999
        path.write_text(json.dumps(data))
        answer = client.post("/api/v1/reload", headers=headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["reloaded"] is True and body["generation"] == 1
        assert (body["applied"], body["workers"], body["behind"]) == (True, 0, [])  # no worker: nothing to wait for
        assert body["notes"] == ["server.port changed: it applies after a restart"]
        assert rt.config.server.port == 8080  # kept until a restart

        post(client, sample_notification())
        run_worker(rt)
        assert len(sink.at("/audit")) == 3 and len(sink.at("/owners")) == 3
        # The old admin token is refused now, the new one works.
        assert client.get("/api/v1/deliveries", headers=headers).status_code == 401
        rotated = {"Authorization": "Bearer rotated-admin-token-42"}
        assert client.get("/api/v1/deliveries", headers=rotated).status_code == 200

        path.write_text("routes: [{channels: [no-such-channel]}]\n")
        refused = client.post("/api/v1/reload", headers=rotated)
        assert refused.status_code == 422
        assert "unknown channel 'no-such-channel'" in refused.json()["errors"][0]
        assert [r.channels for r in rt.config.routes] == [["audit-hook"]]  # the running config stays
        assert post(client, sample_notification(), token=WEBHOOK_TOKEN).status_code == 202
    assert int(redis.get(CONFIG_GENERATION)) == 1


def test_reload_needs_admin_credentials(client: TestClient) -> None:
    answer = client.post("/api/v1/reload")
    assert answer.status_code == 401 and answer.json()["errors"]


def test_reload_without_a_config_file_is_refused(client: TestClient, rt: Runtime) -> None:
    before = rt.config
    answer = client.post("/api/v1/reload", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert answer.status_code == 422 and "without a config file" in answer.json()["errors"][0]
    assert rt.config is before


def test_reload_answers_once_every_live_worker_uses_the_new_config(
    redis: Any, redis_server: Any, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    """It answered at once, while the workers planned with the old config for up to a heartbeat (5 s). Now it
    waits for them: a worker's own heartbeat loop (in a thread here, as `relay worker` runs it) says it runs
    with the new generation; a worker that never does (one that only beats) is named in `behind` once the
    wait (a heartbeat and a second) is over."""
    data = base_config(sink, smtp, tmp_path, redis_server.url).model_dump(
        mode="json", by_alias=True, exclude={"base_dir"}
    )
    # A beat every 0.75 s; the ghost's one beat is alive (dead_worker_after) through the wait, 1.75 s.
    data["dead_worker_after"] = "3s"
    rt = _runtime(tmp_path, redis_server.url, redis, data)
    worker = build(rt.config, redis, config_file=rt.config_file)  # the worker's own runtime, its own name
    stop, reload = threading.Event(), threading.Event()
    beating = threading.Thread(target=_heartbeat, args=(worker, stop, reload, redis.get(CONFIG_GENERATION)))
    beating.start()
    try:
        wait_for(lambda: redis.hget(CONFIG_APPLIED, worker.name) == b"0")  # said at its first beat
        rt.store.heartbeat("ghost-worker")
        with TestClient(create_app(rt)) as client:
            started = time.monotonic()
            body = client.post("/api/v1/reload", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()
            took = time.monotonic() - started
        assert int(redis.hget(CONFIG_APPLIED, worker.name)) == body["generation"] == 1
        assert (body["applied"], body["workers"], body["behind"]) == (False, 2, ["ghost-worker"])
        assert 1.2 <= took < 3.0  # it waited for the ghost a heartbeat and a second, no longer
    finally:
        stop.set()
        beating.join(5)
    _forget(worker)
    assert redis.hget(CONFIG_APPLIED, worker.name) is None  # a worker that stops says so


def test_a_reload_swaps_the_config_and_what_is_built_from_it_whole(
    redis: Any, redis_server: Any, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    """A unit of work pinned before a reload runs on the old config, renderer and catalog together; one pinned
    after, on the new ones together: never a config of one load with a renderer or catalog of another."""
    data = base_config(sink, smtp, tmp_path, redis_server.url).model_dump(
        mode="json", by_alias=True, exclude={"base_dir"}
    )
    rt = _runtime(tmp_path, redis_server.url, redis, data)
    before = rt.pinned()
    assert rt.catalog is None
    data["platform"] = {"url": "https://platform.example.com"}
    assert rt.config_file is not None
    rt.config_file.write_text(json.dumps(data))
    reload_runtime(rt)
    after = rt.pinned()
    assert (before.config.platform.url, before.catalog) == (None, None)
    assert before.renderer.extra["platform_url"] == ""
    assert after.config.platform.url == "https://platform.example.com" and after.catalog is not None
    assert after.renderer.extra["platform_url"] == "https://platform.example.com"
    assert after.loaded is rt.loaded and before.loaded is not rt.loaded
