"""The admin page in a real headless Chromium (Debian's, driven by Playwright): log in, replay a failed
delivery by clicking, see it delivered; release a held one after its confirmation page; keep screenshots.

The app is served by uvicorn on a free loopback port in a thread; the failing channel is the test's
own HTTP sink answering 404. Skipped only when /usr/bin/chromium is absent (`.ci/run` installs it).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest
import uvicorn
from playwright.sync_api import Page, expect, sync_playwright
from starlette.applications import Starlette

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.store import iso
from tests.admin.test_ui_held import held_settings
from tests.conftest import ADMIN_TOKEN, WEBHOOK_TOKEN, run_worker, sample_notification
from tests.servers import HttpSink, free_port, wait_for

CHROMIUM = Path("/usr/bin/chromium")
# What relay's own probe found works here, as root, on a machine with no network but loopback.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed at /usr/bin/chromium (apt-get install -y chromium chromium-driver)",
)


@contextmanager
def serving(app: Starlette) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="uvicorn-ui-test", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), timeout=15)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        assert not thread.is_alive(), "uvicorn did not stop"


@pytest.fixture
def page() -> Iterator[Page]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1360, "height": 900})
            yield context.new_page()
        finally:
            browser.close()


def test_log_in_replay_a_failed_delivery_by_clicking_and_see_it_delivered(
    rt: Runtime, sink: HttpSink, page: Page, tmp_path: Path
) -> None:
    sink.script["/owners"] = [404]  # permanent: the owners' delivery fails at once
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type in ("error", "warning") else None)

    with serving(create_app(rt)) as base:
        payload = sample_notification()
        event_id = payload["metadata"]["eventId"]
        answer = httpx2.post(f"{base}/webhook", json=payload, headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"})
        assert answer.status_code == 202
        run_worker(rt)
        [failed] = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r and r.state == "failed"]
        assert failed.channel == "owners-hook"

        # Not logged in: the page sends the browser to the login form; a wrong token is refused.
        page.goto(f"{base}/ui")
        expect(page).to_have_url(f"{base}/ui/login")
        page.fill("#token", "not-the-token")
        page.click("button[type=submit]")
        expect(page.get_by_role("alert")).to_contain_text("not one of this relay's admin tokens")
        page.fill("#token", ADMIN_TOKEN)
        page.click("button[type=submit]")
        expect(page).to_have_url(f"{base}/ui")
        console.clear()  # the refused login was a 401, as it should be

        # The failure is listed with its channel's name and error, and the counters show it.
        failed_row = page.locator(f"#failed tr.delivery[data-id='{failed.id}']")
        expect(failed_row).to_contain_text("owners-hook")
        expect(failed_row).to_contain_text("404")
        expect(page.locator("#c-failed")).to_have_text("1")
        expect(page.locator("#c-received")).to_have_text("1")
        event_row = page.locator(f"#events tr.delivery[data-id='{failed.id}']")
        expect(event_row).to_have_attribute("data-state", "failed")
        # The inline CSS is allowed by the page's Content-Security-Policy (its nonce) and applied.
        header_colour = page.eval_on_selector("header.top", "e => getComputedStyle(e).backgroundColor")
        assert header_colour == "rgb(17, 24, 39)"
        page.screenshot(path=str(tmp_path / "admin-page-failed.png"), full_page=True)

        failed_row.get_by_role("button", name="Replay").click()
        expect(page.get_by_role("status")).to_contain_text("Requeued 1 failed delivery")
        expect(page.get_by_role("status")).to_be_in_viewport()
        expect(event_row).to_have_attribute("data-state", "queued")
        expect(page.locator("#failed")).to_contain_text("No failed delivery")

        run_worker(rt)  # the 404 was answered once: the replayed send goes through
        page.get_by_role("link", name="Refresh", exact=True).click()
        expect(event_row).to_have_attribute("data-state", "delivered")
        expect(page.locator("#c-failed")).to_have_text("0")
        expect(page.locator("#c-delivered")).to_have_text("3")
        assert len(sink.at("/owners")) == 1

        text = page.content()
        for secret in (WEBHOOK_TOKEN, ADMIN_TOKEN, *(c.url for c in rt.config.channels.values())):
            assert secret not in text
        assert "json://" not in text and "mailto://" not in text

        shot = tmp_path / "admin-page.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        keep_screenshots(tmp_path)

    assert not console, f"the browser reported: {console}"


def keep_screenshots(tmp_path: Path) -> None:
    keep = os.environ.get("RELAY_UI_SCREENSHOT_DIR")
    if keep:  # to look at the page after the run
        Path(keep).mkdir(parents=True, exist_ok=True)
        for png in tmp_path.glob("*.png"):
            shutil.copy(png, Path(keep) / png.name)


def test_release_a_held_delivery_after_its_confirmation_page(
    make_runtime: Callable[..., Runtime], page: Page, tmp_path: Path
) -> None:
    rt = make_runtime(**held_settings())
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type in ("error", "warning") else None)

    with serving(create_app(rt)) as base:
        payload = sample_notification()
        event_id = payload["metadata"]["eventId"]
        answer = httpx2.post(f"{base}/webhook", json=payload, headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"})
        assert answer.status_code == 202
        run_worker(rt)
        [held] = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r and r.state == "held"]
        assert held.notBefore is not None

        page.goto(f"{base}/ui/login")
        page.fill("#token", ADMIN_TOKEN)
        page.click("button[type=submit]")
        expect(page).to_have_url(f"{base}/ui")

        # The held section: when it goes out, why, and its Release button; the badge has its own colour.
        held_row = page.locator(f"#held tr.delivery[data-id='{held.id}']")
        expect(held_row).to_contain_text("requester-email")
        expect(held_row).to_contain_text("quiet hours")
        expect(held_row.locator("time")).to_have_attribute("datetime", iso(held.notBefore))
        event_row = page.locator(f"#events tr.delivery[data-id='{held.id}']")
        badge = event_row.locator(".badge.state-held")
        expect(badge).to_have_text("held")
        assert badge.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(239, 235, 253)"
        page.screenshot(path=str(tmp_path / "admin-page-held.png"), full_page=True)

        # Release asks first, on a page of its own; Cancel goes back and sends nothing.
        held_row.get_by_role("button", name=f"Release delivery {held.id}").click()
        expect(page.get_by_role("heading", name="Send held deliveries now?")).to_be_visible()
        expect(page.locator("#release")).to_contain_text("1 delivery goes out now")
        page.screenshot(path=str(tmp_path / "admin-release-confirm.png"), full_page=True)
        page.get_by_role("link", name="Cancel").click()
        expect(page).to_have_url(f"{base}/ui")
        current = rt.store.delivery(held.id)
        assert current is not None and current.state == "held"

        held_row.get_by_role("button", name=f"Release delivery {held.id}").click()
        page.get_by_role("button", name="Release now").click()
        expect(page.get_by_role("status")).to_contain_text("Released 1 held delivery of")
        expect(page.get_by_role("status")).to_be_in_viewport()  # the notice at the top, in view
        expect(page.locator("#held")).to_contain_text("No held delivery")
        expect(event_row).to_have_attribute("data-state", "queued")

        run_worker(rt)
        page.get_by_role("link", name="Refresh", exact=True).click()
        expect(event_row).to_have_attribute("data-state", "delivered")
        expect(event_row.locator(".not-before")).to_have_count(0)  # delivered: no stale notBefore
        page.screenshot(path=str(tmp_path / "admin-page-released.png"), full_page=True)
        keep_screenshots(tmp_path)

    assert not console, f"the browser reported: {console}"
