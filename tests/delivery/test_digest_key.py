"""A digest gathered by a field of the notification (`digest: {window, key: dotted.path}`), as Novu's digest
key: one message per value (per data product) per window; absent or null reads as one group. Real Redis,
real RQ and the HTTP sink; the windows' wake-ups moved forward with `run_scheduled`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from relay.config import DigestConfig
from relay.digests.model import gather_key, group_of
from relay.runtime.bootstrap import Runtime
from relay.storage.leases import LEASES, delivery_unit
from tests.delivery.test_digests import _accept, _digest, _item, _notification, _routes, _send_due
from tests.servers import HttpSink

KEY = "body.requestedResource.parentSystem.urn"


def _for(product: str | None, title: str) -> dict[str, Any]:
    data = _notification(title)
    if product is None:
        data["body"]["requestedResource"]["parentSystem"]["urn"] = None
    else:
        data["body"]["requestedResource"]["parentSystem"]["urn"] = product
    return data


def test_one_message_per_data_product_per_window(make_runtime: Callable[..., Runtime], sink: HttpSink) -> None:
    rt = make_runtime(routes=_routes({"window": "15m", "key": KEY}))
    _accept(
        rt,
        _for("urn:dmb:dp:finance:invoices:1", "invoices one"),
        _for("urn:dmb:dp:sales:orders:1", "orders one"),
        _for("urn:dmb:dp:finance:invoices:1", "invoices two"),
        _for(None, "no product one"),
        _for(None, "no product two"),
    )
    assert sink.at("/owners") == []
    _send_due(rt)
    bodies = sorted(h.json()["message"] for h in sink.at("/owners"))
    assert len(bodies) == 3, bodies
    invoices = next(b for b in bodies if "invoices one" in b)
    assert "invoices two" in invoices and "orders" not in invoices
    orphans = next(b for b in bodies if "no product one" in b)
    assert "no product two" in orphans and "invoices" not in orphans


def test_without_a_key_the_route_gathers_as_before(make_runtime: Callable[..., Runtime], sink: HttpSink) -> None:
    rt = make_runtime(routes=_routes("15m"))
    _accept(rt, _for("urn:a", "a"), _for("urn:b", "b"))
    _send_due(rt)
    assert len(sink.at("/owners")) == 1


def test_the_value_of_a_key_and_the_groups_it_makes() -> None:
    data = {"body": {"a": {"b": "x", "n": None, "list": [{"c": 1}]}}}
    assert group_of(data, "body.a.b") == "x"
    assert group_of(data, "body.a.n") == group_of(data, "body.missing") == ""
    assert group_of(data, "body.a.list.0.c") == "1"
    assert gather_key("r", "c", None, group="x") != gather_key("r", "c", None, group="y")
    assert gather_key("r", "c", None) == gather_key("r", "c", None, group=None)
    with pytest.raises(ValidationError):
        DigestConfig.model_validate({"window": "1m", "key": "body..urn"})


def test_a_window_ends_by_relay_s_clock_not_by_a_redis_ttl(make_runtime: Callable[..., Runtime]) -> None:
    """Issue 45: the digest's window is relay's clock's (Redis' TTL on its key, in real seconds, only cleans up):
    a delivery that comes after the window's end opens a digest of its own, even while the last one waits to be
    sent (in another worker's hands here)."""
    rt = make_runtime(routes=_routes({"window": "15m", "max_items": 20}))
    [first] = _accept(rt, _notification("a"))
    digest = _item(rt, first).digest
    assert digest is not None
    rt.clock.advance(15 * 60 + 1)
    assert rt.redis.hsetnx(LEASES, delivery_unit(digest), "another-worker")
    [second] = _accept(rt, _notification("b"))
    later = _item(rt, second).digest
    assert later is not None and later != digest
    assert _digest(rt, digest).items == [_item(rt, first).id]
