"""/metrics through prometheus-client, over the counters in Redis; the admin page reads the same counters."""

from __future__ import annotations

import re
from collections.abc import Callable

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from relay.admin.metrics import HELP
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.leases import orphaned
from tests.conftest import ADMIN_TOKEN, post, run_worker, sample_notification


def scrape(client: TestClient) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample of /metrics by name, parsed by prometheus-client's own parser; every family typed."""
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == CONTENT_TYPE_PLAIN_0_0_4
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    families = {}
    for family in text_string_to_metric_families(answer.text):
        families[family.name] = family.type
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    # The parser names counter families without "_total"; the types are the ones relay declares.
    for name, (kind, _) in HELP.items():
        assert families[name.removesuffix("_total") if kind == "counter" else name] == kind, name
    return samples


def test_every_family_is_exposed_with_its_type_and_counts_add_up(client: TestClient, rt: Runtime) -> None:
    payload = sample_notification()
    post(client, payload)
    post(client, payload)
    run_worker(rt)
    samples = scrape(client)
    assert samples["relay_notifications_received_total"] == {
        (("kind", "notification:access-control-request-failed"),): 1.0
    }
    assert samples["relay_notifications_duplicate_total"] == {(): 1.0}
    states = samples["relay_deliveries_total"]
    assert sum(v for labels, v in states.items() if ("state", "delivered") in labels) == 3.0
    buckets = samples["relay_delivery_latency_seconds_bucket"]
    # Cumulative: never falling from one bound to the next, +Inf equal to the count.
    values = list(buckets.values())
    assert values == sorted(values) and buckets[(("le", "+Inf"),)] == 3.0
    assert samples["relay_delivery_latency_seconds_count"] == {(): 3.0}
    assert samples["relay_up"] == {(): 1.0} and samples["relay_queue_depth"] == {(): 0.0}


def test_relay_metrics_stay_off_the_process_wide_registry(client: TestClient) -> None:
    assert "relay_up" in client.get("/metrics").text
    assert b"relay_" not in generate_latest(REGISTRY)


def test_the_admin_page_and_metrics_show_the_same_counters(client: TestClient, rt: Runtime) -> None:
    payload = sample_notification()
    post(client, payload)
    post(client, payload)
    post(client, sample_notification())
    run_worker(rt)
    post(client, sample_notification())  # waits in the queue
    rt.store.heartbeat("worker-1")
    html = client.get("/ui", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text
    page = {k: float(v) for k, v in re.findall(r'id="c-([a-z]+)">(\d+)<', html)}
    samples = scrape(client)
    delivered = sum(v for labels, v in samples["relay_deliveries_total"].items() if ("state", "delivered") in labels)
    assert page == {
        "received": sum(samples["relay_notifications_received_total"].values()),
        "duplicates": samples["relay_notifications_duplicate_total"][()],
        "delivered": delivered,
        "failed": samples["relay_deliveries_failed_kept"][()],
        "queue": samples["relay_queue_depth"][()],
        "workers": samples["relay_workers_alive"][()],
    }
    assert page["received"] == 3 and page["delivered"] == 6 and page["queue"] == 1 and page["workers"] == 1


def test_one_liveness_threshold_for_readyz_the_metrics_the_page_and_the_sweep(
    make_runtime: Callable[..., Runtime],
) -> None:
    """A worker's beat is judged by `dead_worker_after` everywhere: alive for all of them, then dead for all."""
    rt = make_runtime(dead_worker_after="20s")
    leases = {"d:held": "worker-1"}
    with TestClient(create_app(rt)) as client:
        rt.store.heartbeat("worker-1")
        for age, alive in ((19.0, True), (2.0, False)):  # 19 s old, then 21 s old
            rt.clock.advance(age)
            ready = client.get("/readyz").status_code == 200
            gauge = scrape(client)["relay_workers_alive"][()]
            swept = orphaned(leases, rt.store.worker_beats(), rt.clock(), rt.store.dead_worker_after, {})
            assert (ready, gauge, rt.store.live_workers(), swept) == (
                (True, 1.0, ["worker-1"], {}) if alive else (False, 0.0, [], {"worker-1": ["d:held"]})
            )
