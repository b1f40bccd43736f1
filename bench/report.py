"""The bench's table: relay beside the durable peer, checked against issue 26's limits (P2's as issue 36 set
them: p99 at 20/s at most 50 ms, p50 at most the peer's, capacity at least 2 x the peer's), and today's
references (bare Starlette, naive Flask, Alertmanager, the stack floor) for information.

Ratios are medians of each round's own ratio: relay and its alternatives took turns within a round, so a
slow spell of the shared machine falls on both sides of a round's ratio.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

P2_P99_MS = 50.0  # issue 36: P2's p99 at 20/s; the stack floor stays in the table for information


def paired(res: dict[str, Any], key: str, other: str) -> float:
    runs = res["runs"]
    return statistics.median(_ratio(a, b) for a, b in zip(runs[key], runs[other], strict=True))


def _ratio(a: float, b: float) -> float:
    if b:
        return a / b
    return math.inf if a else 1.0


def _x(ratio: float, digits: int = 2) -> str:
    return "inf" if math.isinf(ratio) else f"{ratio:.{digits}f} x"


def _rate(value: float) -> str:
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def checks(res: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """Issue 26's limits, P2's as issue 36 set them: figure -> (what held or not, as text; held)."""
    m, p1 = res["median"], res["p1"]
    p1_peer = statistics.median(_ratio(a, b) for a, b in zip(p1["relay_runs"], p1["peer_runs"], strict=True))
    p50_peer = paired(res, "p2_light_p50_ms", "p2_peer_light_p50_ms")
    cap = paired(res, "p2_capacity", "p2_peer_capacity")
    p3, p4 = paired(res, "p3_relay", "p3_peer"), paired(res, "p4_relay", "p4_peer")
    # PSS: RQ's scheduler is forked from a worker, and RSS would count the pages they share twice.
    rss = res["p5"].get("pss_relay_mb", res["p5"]["rss_relay_mb"])
    return {
        "P1": (f"ingest {_x(p1_peer)} the peer's (>= 1.0 x)", p1_peer >= 1.0),
        "P2 p50": (f"light-load p50 {_x(p50_peer)} the peer's (<= 1 x)", p50_peer <= 1.0),
        "P2 p99": (
            f"light-load p99 {m['p2_light_p99_ms']:.1f} ms (<= {P2_P99_MS:.0f} ms)",
            m["p2_light_p99_ms"] <= P2_P99_MS,
        ),
        "P2 capacity": (
            f"capacity {m['p2_capacity']:.0f} vs {m['p2_peer_capacity']:.0f}/s: {_x(cap, 1)} the peer's (>= 2 x)",
            cap >= 2.0,
        ),
        "P3": (f"slow sink {_x(p3, 1)} the peer (>= 5 x)", p3 >= 5.0),
        "P4": (f"instant sink {_x(p4)} the peer (>= 1.0 x)", p4 >= 1.0),
        "P5": (f"{rss:.0f} MB (PSS) after {res['p5']['count']:,} notifications (<= 300 MB)", rss <= 300),
    }


def render(res: dict[str, Any]) -> str:
    m, p1, p5 = res["median"], res["p1"], res["p5"]
    held = {k: "yes" if ok else "NO" for k, (_, ok) in checks(res).items()}
    am50, am99 = m.get("p2_am_light_p50_ms"), m.get("p2_am_light_p99_ms")
    p1_peer = statistics.median(_ratio(a, b) for a, b in zip(p1["relay_runs"], p1["peer_runs"], strict=True))
    p1_bare = statistics.median(_ratio(a, b) for a, b in zip(p1["relay_runs"], p1["bare_runs"], strict=True))
    floor = paired(res, "p2_light_p50_ms", "p2_floor_light_p50_ms")
    rows = [
        ("P1 ingest (notifications/s)", f"{p1['relay']:,.0f}", f"{p1['peer']:,.0f}", _x(p1_peer), ">= 1.0 x",
         held["P1"], f"bare Starlette {p1['bare']:,.0f}", _x(p1_bare)),
        ("P2 POST->sink at 20/s, p50", f"{m['p2_light_p50_ms']:.1f} ms", f"{m['p2_peer_light_p50_ms']:.1f} ms",
         _x(paired(res, "p2_light_p50_ms", "p2_peer_light_p50_ms")), "<= 1 x", held["P2 p50"],
         f"stack floor {m['p2_floor_light_p50_ms']:.1f} ms", _x(floor)),
        ("P2 POST->sink at 20/s, p99", f"{m['p2_light_p99_ms']:.1f} ms", f"{m['p2_peer_light_p99_ms']:.1f} ms",
         "", f"<= {P2_P99_MS:.0f} ms", held["P2 p99"], f"Alertmanager {am99:.1f} ms" if am99 is not None else "", ""),
        ("P2 Alertmanager at 20/s, p50", "", "", "", "", "",
         f"{am50:.1f} ms" if am50 is not None else "not installed", ""),
        ("P2 capacity: highest rate, p99 < 1 s", f"{m['p2_capacity']:,.0f}/s", f"{m['p2_peer_capacity']:,.0f}/s",
         _x(paired(res, "p2_capacity", "p2_peer_capacity"), 1), ">= 2 x", held["P2 capacity"], "", ""),
        ("P2 p99 at 1,000/s", f"{m['p2_1000_p99_ms']:.0f} ms", "", "", "", "", "", ""),
        ("P3 slow sink 100 ms (deliveries/s)", _rate(m["p3_relay"]), _rate(m["p3_peer"]),
         _x(paired(res, "p3_relay", "p3_peer"), 1), ">= 5 x", held["P3"], f"Flask {m['p3_flask']:,.1f}",
         _x(paired(res, "p3_relay", "p3_flask"), 1)),
        ("P4 instant sink (deliveries/s)", _rate(m["p4_relay"]), _rate(m["p4_peer"]),
         _x(paired(res, "p4_relay", "p4_peer")), ">= 1.0 x", held["P4"], f"Flask {m['p4_flask']:,.0f}",
         _x(paired(res, "p4_relay", "p4_flask"))),
        (f"P5 memory (PSS) after {p5['count']:,} notifications", f"{p5.get('pss_relay_mb', 0):.0f} MB", "", "",
         "<= 300 MB", held["P5"], f"RSS {p5['rss_relay_mb']:.0f} MB + Redis {p5['rss_redis_mb']:.0f} MB", ""),
    ]  # fmt: skip
    head = ("figure", "relay", "durable peer", "relay/peer", "limit (issues 26, 36)", "held", "reference", "relay/ref")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in [head, *rows]]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def summary(res: dict[str, Any]) -> str:
    """Which of the limits held in this run, one line each."""
    return "\n".join(f"{name}: {'held' if ok else 'NOT HELD'}: {text}" for name, (text, ok) in checks(res).items())
