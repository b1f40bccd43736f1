"""The admin page as an operator's console, on a desk and on a phone: the chart of the last hour (counted with
each state change, relay.storage.activity), the channels' health (GET /api/v1/channels' own rows), filters by
state, channel and kind, notices that stay in view after a button, and a page that fits 390 px.

Real Redis, RQ workers, HTTP and SMTP sinks; the browser is Debian's Chromium driven by Playwright (one browser,
both sizes). With RELAY_SCREENSHOTS=docs/img the browser test saves the screenshots the docs show.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright
from starlette.testclient import TestClient

from relay.admin import ui_view
from relay.admin.ui_chart import HEIGHT, chart
from relay.core.model import Delivery
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.activity import Minute, last_hour
from tests.admin.forms import csrf_of
from tests.admin.test_ui_browser import CHROMIUM, CHROMIUM_ARGS, serving
from tests.admin.test_ui_held import held_settings, login, records, section
from tests.conftest import ADMIN_TOKEN, post, run_worker, sample_notification
from tests.servers import HttpSink

KIND = "notification:access-control-request-failed"


def busy_runtime(make_runtime: Callable[..., Runtime], sink: HttpSink, events: int = 3) -> tuple[Runtime, list[str]]:
    """Notifications whose owners' hook refuses the first (404: failed), whose requester's e-mail is held (quiet
    hours until next year) and whose managers' hook delivers: their eventIds."""
    rt = make_runtime(**held_settings())
    sink.script["/owners"] = [404]
    ids = []
    with TestClient(create_app(rt)) as client:
        for _ in range(events):
            payload = sample_notification()
            assert post(client, payload).status_code == 202
            ids.append(payload["metadata"]["eventId"])
    run_worker(rt)
    return rt, ids


def all_records(rt: Runtime, ids: list[str]) -> list[Delivery]:
    return [r for event_id in ids for r in records(rt, event_id)]


def test_the_chart_counts_each_state_reached_in_its_minute(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt, ids = busy_runtime(make_runtime, sink)
    stored = all_records(rt, ids)
    hour = last_hour(rt.redis, rt.clock())
    assert len(hour) == 60 and hour[-1].start <= rt.clock() < hour[-1].start + 60
    counted: dict[str, int] = {}
    for minute in hour:
        for state, n in minute.counts.items():
            counted[state] = counted.get(state, 0) + n
    # Each delivery counted once for the state it came to (queued at planning is no change: not counted; held
    # when it came due is).
    assert counted.get("delivered") == sum(r.state == "delivered" for r in stored) == 5
    assert counted.get("failed") == sum(r.state == "failed" for r in stored) == 1
    assert counted.get("held") == sum(r.state == "held" for r in stored) == 3
    [key] = [k for k in rt.redis.scan_iter("relay:activity:*")]
    assert 7000 < int(rt.redis.ttl(key)) <= 7200

    drawn = chart(hour)
    assert drawn.totals["delivered"] == 5 and drawn.totals["failed"] == 1 and drawn.totals["other"] == 3
    assert drawn.peak == 9
    [bar] = [b for b in drawn.bars if b.segments]
    assert [s.outcome for s in bar.segments] == ["delivered", "failed", "other"]  # delivered at the bottom
    assert bar.segments[0].height == round(HEIGHT * 5 / 9, 2) and bar.segments[2].y == 0


def test_an_empty_hour_draws_no_bar() -> None:
    drawn = chart([Minute(60.0 * m, {}) for m in range(60)])
    assert drawn.empty and not any(b.segments for b in drawn.bars) and drawn.totals["delivered"] == 0
    busy = chart([Minute(0.0, {"skipped": 2, "retrying": 1}), Minute(60.0, {"delivered": 6})])
    assert busy.totals == {"delivered": 6, "failed": 0, "retrying": 1, "other": 2} and busy.peak == 6


def test_filters_list_the_deliveries_they_choose_and_buttons_come_back_to_them(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt, ids = busy_runtime(make_runtime, sink)
    stored = all_records(rt, ids)
    [failed] = [r for r in stored if r.state == "failed"]
    with TestClient(create_app(rt)) as client:
        login(client)
        html = client.get("/ui?state=failed").text
        listed = section(html, "deliveries")
        assert listed.count('<tr class="delivery"') == 1 and f'data-id="{failed.id}"' in listed
        assert 'id="events"' not in html  # the filtered list stands in for the notifications

        by_channel = section(client.get("/ui?channel=managers-hook").text, "deliveries")
        assert by_channel.count('<tr class="delivery"') == 3 and "owners-hook" not in by_channel
        held = section(client.get("/ui?state=held&kind=notification:access-*").text, "deliveries")
        assert held.count('data-state="held"') == 3
        assert section(client.get("/ui?kind=notification:other").text, "deliveries").count("<tr class") == 0
        assert client.get("/ui?state=sleeping").status_code == 400

        # The failed section is filtered too; a Replay from the filtered list comes back to it, notice on top.
        assert f'data-id="{failed.id}"' not in section(client.get("/ui?channel=managers-hook").text, "failed")
        form = {"csrf": csrf_of(html), "id": failed.id, "back": "state=failed&evil=1"}
        answer = client.post("/ui/replay", data=form, follow_redirects=False)
        assert answer.headers["location"] == f"/ui?replayed=1&of={failed.eventId}&state=failed#notice"

        # The release confirmation names each delivery's recipient, not only its type.
        [email] = [r for r in stored if r.state == "held" and r.eventId == ids[0]]
        confirm = client.get(f"/ui/release?id={email.id}&back=state%3Dheld").text
        assert email.recipient and f'data-label="Recipient">{email.recipient}' in confirm
        assert 'name="back" value="state=held"' in confirm and 'href="/ui?state=held"' in confirm


def test_the_filtered_list_pages_with_a_cursor(
    make_runtime: Callable[..., Runtime], sink: HttpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's filtered list reads a page of the index at a time: "Older deliveries" follows the listing's
    cursor, each delivery once, newest first; a cursor no listing gave is a 400."""
    monkeypatch.setattr(ui_view, "DELIVERIES_LISTED", 2)
    rt, ids = busy_runtime(make_runtime, sink)
    managers = sorted(
        (r for r in all_records(rt, ids) if r.channel == "managers-hook"), key=lambda r: (r.createdAt, r.id)
    )
    with TestClient(create_app(rt)) as client:
        login(client)
        first = section(client.get("/ui?channel=managers-hook").text, "deliveries")
        older = re.search(r'href="(/ui\?cursor=[^"]+)">Older deliveries', first)
        assert older is not None
        second = section(client.get(html.unescape(older.group(1))).text, "deliveries")
        assert "Older deliveries" not in second
        shown = re.findall(r'data-id="([^"]+)"', first) + re.findall(r'data-id="([^"]+)"', second)
        assert [i for i in shown if i in {r.id for r in managers}] == [r.id for r in reversed(managers)]
        assert client.get("/ui?channel=managers-hook&cursor=nonsense").status_code == 400


def test_the_page_shows_the_channels_of_the_channels_api(make_runtime: Callable[..., Runtime], sink: HttpSink) -> None:
    rt, _ = busy_runtime(make_runtime, sink)
    with TestClient(create_app(rt)) as client:
        api = client.get("/api/v1/channels", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()["channels"]
        html = section(login(client).get("/ui").text, "channels")
    for ch in api:
        row = html.split(f'data-channel="{ch["name"]}"', 1)[1].split("</tr>", 1)[0]
        assert f'data-state="{ch["state"]}"' in html and f">{ch['deliveredLastHour']}</td>" in row
        assert (ch["lastError"] or "—") in row


# -- in Chromium, at 390 and 1280 px ----------------------------------------------------------------------------

SIZES = {"desk": (1280, 900), "phone": (390, 844)}  # the phone last: it replays


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def fits(page: Page) -> None:
    """No sideways scroll: the document is no wider than the viewport."""
    width, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    # What overflows, to say where: the innermost boxes whose content is wider than they are.
    wide = page.evaluate(
        "[...document.querySelectorAll('main *')].filter(e => e.scrollWidth > e.clientWidth && e.clientWidth > 0)"
        ".slice(-5).map(e => `${e.tagName}.${e.className} ${e.scrollWidth} > ${e.clientWidth}`)"
    )
    assert width <= inner, f"{page.url} is {width} px wide in a {inner} px viewport: {wide}"


def reachable(page: Page, selector: str) -> int:
    """Every button of `selector` lies within the viewport's width; how many there are."""
    inner = page.evaluate("window.innerWidth")
    boxes = [b.bounding_box() for b in page.locator(selector).all()]
    for box in boxes:
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= inner, (selector, box)
    return len(boxes)


def complaints(seen: list[str]) -> Callable[[ConsoleMessage], None]:
    """What the browser's console says of errors and warnings, into `seen`."""

    def note(msg: ConsoleMessage) -> None:
        if msg.type in ("error", "warning"):
            seen.append(msg.text)

    return note


def shoot(page: Page, name: str) -> None:
    keep = os.environ.get("RELAY_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(keep) / name), full_page=True)


def test_the_console_fits_a_phone_and_a_desk(
    make_runtime: Callable[..., Runtime], sink: HttpSink, browser: Browser
) -> None:
    rt, ids = busy_runtime(make_runtime, sink)
    stored = all_records(rt, ids)
    [failed] = [r for r in stored if r.state == "failed"]
    # A long error, as a refusing service writes them: it wraps by words, not a letter a line.
    failed.lastError = "HTTP 404 from the owners' hook: " + "the resource you asked for is not there " * 4
    rt.store.update(failed, failed.state)
    with serving(create_app(rt)) as base:
        for size, (width, height) in SIZES.items():
            context = browser.new_context(viewport={"width": width, "height": height})
            console: list[str] = []
            page = context.new_page()
            page.on("console", complaints(console))
            page.goto(f"{base}/ui/login")
            page.fill("#token", ADMIN_TOKEN)
            page.click("button[type=submit]")
            expect(page).to_have_url(f"{base}/ui")

            shoot(page, f"console-{width}.png")
            fits(page)
            expect(page.locator("#activity svg.chart g.bar")).to_have_count(1)
            expect(page.locator("#activity .legend-delivered b")).to_have_text("5")
            expect(page.locator("#activity .legend-failed b")).to_have_text("1")
            # The numbers readable without hovering (issue 48): the top's count on a y-axis, a table on a tap.
            expect(page.locator("#activity .y-axis span").first).to_have_text("9")
            page.locator("#activity .chart-numbers summary").click()
            minute = page.locator("#activity .chart-numbers tbody tr").first
            expect(minute.locator("td")).to_have_text([re.compile(r"\d\d:\d\d"), "5", "1", "0", "3"])
            # A phone has a section index at the top, each link a finger's target; a desk needs none.
            sections = page.locator("nav.sections a")
            if size == "phone":
                expect(sections).to_have_text(["Failed", "Held", "Silences", "Channels", "Notifications"])
                assert min((sections.nth(i).bounding_box() or {"height": 0})["height"] for i in range(5)) >= 44
            else:
                expect(page.locator("nav.sections")).to_be_hidden()
            for name in ("owners-hook", "managers-hook", "requester-email"):
                expect(page.locator(f"#channels tr[data-channel='{name}']")).to_be_visible()
            # Every action within the screen's width: Replay, Release, Log out, a silence, the filters.
            assert reachable(page, "button.replay") >= 3 and reachable(page, "button.release") >= 6
            assert reachable(page, "header.top button") == 1 and reachable(page, ".add-silence button") == 1
            assert reachable(page, ".filters button") == 1 and reachable(page, ".filters select") == 2
            error_cell = page.locator(f"#failed tr.delivery[data-id='{failed.id}'] td.error")
            assert (error_cell.bounding_box() or {"width": 0})["width"] >= 150

            # The release confirmation fits too, each recipient named; Cancel comes back.
            page.locator("#held button.release").first.click()
            expect(page.locator("#release tr.delivery td.recipient").first).to_contain_text("user:default/alice.rossi")
            fits(page)
            shoot(page, f"release-{width}.png")
            page.get_by_role("link", name="Cancel").click()
            expect(page).to_have_url(f"{base}/ui")

            # Filter by state with the form; replay from the filtered list: back to it, the notice in view.
            page.select_option("select[name=state]", "failed")
            page.get_by_role("button", name="Filter").click()
            expect(page).to_have_url(f"{base}/ui?state=failed&channel=&kind=")  # a plain GET form's
            rows = page.locator("#deliveries tr.delivery")
            expect(rows).to_have_count(1)
            expect(rows.first).to_have_attribute("data-state", "failed")
            fits(page)
            if size == "phone":
                rows.first.get_by_role("button", name="Replay").click()
                expect(page).to_have_url(f"{base}/ui?replayed=1&of={quote(failed.eventId)}&state=failed#notice")
                expect(page.locator("#notice")).to_be_in_viewport()
                expect(page.locator("#notice")).to_contain_text("Requeued 1 failed delivery of")
                run_worker(rt)  # the 404 was answered once: the replay is delivered

            # One delivery's page fits too.
            page.goto(f"{base}/ui/deliveries/{quote(failed.id, safe='')}")
            expect(page.locator("tr.try").first).to_be_visible()
            assert reachable(page, "header.top button") == 1  # Log out, here too
            shoot(page, f"delivery-{width}.png")
            fits(page)
            context.close()
            assert not console, f"the browser reported: {console}"
