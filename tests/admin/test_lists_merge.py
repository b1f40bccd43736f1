"""The merge of the lists of deliveries into a page (`relay.storage.lists.merge`, issue 36: in Python, no longer a
script): against a plain sort of everything, over many lists, ties in createdAt, `since`, and the cursor from
page to page."""

from __future__ import annotations

import random
from typing import Any

import pytest
from redis import Redis

from relay.storage.lists import LISTS, Cursor, Lists, list_key, merge

STATES = ["delivered", "failed", "held", "queued"]


def _fill(redis: Redis, rng: random.Random, lists: int, entries: int, times: int) -> list[tuple[float, str]]:
    """`entries` spread unevenly over `lists` lists, their createdAt drawn from `times` values (many ties)."""
    keys = [list_key(STATES[n % 4], f"ch{n // 4 % 5}", f"k{n // 20}") for n in range(lists)]
    everything = []
    for n in range(entries):
        key = keys[min(int(rng.expovariate(4 / lists)), lists - 1)]  # a few lists hold most entries
        score = 1_700_000_000 + rng.randrange(times) / 7  # not exact in binary: the score text must round-trip
        ident = f"d{rng.randrange(10**6):06d}-{n}"
        redis.zadd(key, {ident: score})
        redis.sadd(LISTS, key)
        everything.append((score, ident))
    return sorted(everything, reverse=True)


def _pages(lists: Lists, size: int, since: float | None = None) -> list[list[tuple[str, str]]]:
    pages = []
    cursor: Cursor | None = None
    while True:
        page, cursor = lists.page(since=since, limit=size, cursor=cursor)
        pages.append(page)
        if cursor is None:
            return pages


@pytest.mark.parametrize(
    ("lists", "entries", "times", "size"), [(120, 900, 40, 50), (7, 300, 3, 17), (60, 500, 500, 1)]
)
def test_pages_merge_every_list_as_one_sort_of_everything(
    redis: Redis, lists: int, entries: int, times: int, size: int
) -> None:
    everything = _fill(redis, random.Random(lists), lists, entries, times)
    pages = _pages(Lists(redis), size)
    listed = [(float(score), ident) for page in pages for ident, score in page]
    assert listed == everything  # newest first, equal times by id (highest first), no gap, no repeat
    assert all(len(page) == size for page in pages[:-1]) and 0 < len(pages[-1]) <= size
    since = everything[len(everything) // 3][0]
    wanted = [e for e in everything if e[0] >= since]
    assert [(float(s), i) for page in _pages(Lists(redis), size, since) for i, s in page] == wanted


def test_a_page_s_score_is_the_stored_text_and_its_cursor_names_its_last_entry(redis: Redis) -> None:
    redis.zadd(list_key("delivered", "chat", "k"), {"a": 1795692446.2775326, "b": 1795692446.2775326, "c": 1.5})
    redis.sadd(LISTS, list_key("delivered", "chat", "k"))
    page, cursor = Lists(redis).page(limit=1)
    assert page == [("b", "1795692446.2775326")] and cursor == Cursor("1795692446.2775326", "b")
    assert Lists(redis).page(limit=5, cursor=cursor) == ([("a", "1795692446.2775326"), ("c", "1.5")], None)


def test_a_merge_is_the_page_only_when_no_list_read_to_its_count_may_hold_more_of_it() -> None:
    read = {
        "x": [(b"x1", 9.0), (b"x2", 8.0)],  # read to its count: what follows x2 may come before y1
        "y": [(b"y1", 5.0)],  # read whole (fewer than its count)
    }
    counts = {"x": 2, "y": 2, "z": 2}
    assert merge(read, counts, None, 3) == ([("x1", "9.0", "x"), ("x2", "8.0", "x"), ("y1", "5.0", "y")], False)
    assert merge(read, counts, None, 2) == ([("x1", "9.0", "x"), ("x2", "8.0", "x")], True)  # x2: the page's last
    read["z"] = [(b"z1", 1.0), (b"z0", 1.0)]  # read to its count, below the page's last: it may hold no more
    read["y"] = [(b"y1", 5.0), (b"y0", 5.0)]  # the page's last (y0) at once: what follows is below
    assert merge({k: read[k] for k in "yz"}, counts, None, 2) == ([("y1", "5.0", "y"), ("y0", "5.0", "y")], True)
    assert [e[0] for e in merge(read, counts, None, 5)[0]] == ["x1", "x2", "y1", "y0", "z1"]
    assert not merge(read, counts, None, 5)[1]
    assert merge(read, counts | {"x": 3, "y": 3}, None, 5)[1]  # x and y read whole; z below the last (z1)
    after = Cursor("8.0", "x2")  # x2 shown: left out, as x1 would be were it read (its id is not below x2's)
    assert merge({"x": [(b"x3", 8.0), (b"x2", 8.0), (b"x1", 8.0)]}, {"x": 3}, after, 2) == ([("x1", "8.0", "x")], False)


def test_a_page_reads_first_as_deep_as_the_last_one_took_of_each_list(redis: Redis) -> None:
    everything = _fill(redis, random.Random(3), 40, 400, 400)
    lists, merges = Lists(redis), []

    def counted(*args: Any) -> Any:
        merges.append(args[1])
        return merge(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("relay.storage.lists.merge", counted)
        assert [i for i, _ in lists.page(limit=30)[0]] == [i for _, i in everything[:30]]
        first = len(merges)
        merges.clear()
        assert [i for i, _ in lists.page(limit=30)[0]] == [i for _, i in everything[:30]]
    assert first >= 2 and len(merges) == 1  # the same page again: one read of every list
    assert max(merges[0].values()) > 2  # a list read deeper than its share (2 of 31 over 40) at once
    # Of each list its share, or what the last page took of it and one more: no deeper.
    assert sum(merges[0].values()) <= 31 + 2 * len(merges[0])
