"""The people's pages in a real headless Chromium (Debian's, driven by Playwright), on a phone's screen and a
desktop's: the preference page from a real e-mail's link, a switch turned off and hours set, saved by the
form (no JavaScript needed, none run: the page has none); one-click unsubscribe's confirmation, its button
and its undo. Screenshots are kept in the test's directory (and in $RELAY_UI_SCREENSHOT_DIR when set)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx2
import pytest
from playwright.sync_api import Page, expect, sync_playwright
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.admin.test_ui_browser import CHROMIUM, CHROMIUM_ARGS, keep_screenshots, serving
from tests.conftest import ADMIN_TOKEN, post, run_worker, sample_notification
from tests.servers import SmtpSink

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed at /usr/bin/chromium (apt-get install -y chromium chromium-driver)",
)
PHONE = {"width": 390, "height": 844}
KIND = "notification:access-control-request-failed"


@pytest.fixture
def browser_page(request: pytest.FixtureRequest) -> Iterator[Page]:
    viewport = getattr(request, "param", PHONE)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=viewport, java_script_enabled=False)
            yield context.new_page()
        finally:
            browser.close()


def _mail_links(make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink) -> tuple[Runtime, str, str]:
    rt = make_runtime(
        preferences={"public_url": "https://relay.example.com", "secret": "k" * 40},
        templates={"dir": str(tmp_path / "templates"), "builtin": True},
    )
    with TestClient(create_app(rt)) as client:
        assert post(client, sample_notification()).status_code == 202
    run_worker(rt)
    [mail] = smtp.mails
    unsubscribe = urlsplit(str(mail.message["List-Unsubscribe"])[1:-1]).path
    found = re.search(r"https://relay\.example\.com(/preferences/\S+)", mail.part("text/plain") or "")
    assert found is not None
    return rt, found.group(1), unsubscribe


def _fits(page: Page) -> None:
    """Nothing wider than the screen: every row and the Save button lie within it."""
    width = (page.viewport_size or PHONE)["width"]
    for locator in (page.locator("main"), page.locator(".row").first, page.get_by_role("button", name="Save")):
        box = locator.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box


def _stored(base: str) -> dict[str, object]:
    answer = httpx2.get(
        f"{base}/api/v1/people/{quote('user:default/alice.rossi', safe='')}/preferences",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert answer.status_code == 200
    return dict(answer.json())


def test_the_preference_page_on_a_phone_switches_a_kind_off_and_sets_hours(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink, browser_page: Page, tmp_path: Path
) -> None:
    rt, prefs_path, _ = _mail_links(make_runtime, tmp_path, smtp)
    page = browser_page
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type in ("error", "warning") else None)
    with serving(create_app(rt)) as base:
        page.goto(base + prefs_path)
        expect(page.get_by_role("heading", name="Your notifications")).to_be_visible()
        # Names people know: hers (the payload's), the channel's label (its readable name), not relay's refs.
        expect(page.get_by_text("For Alice Rossi.")).to_be_visible()
        switch = page.get_by_label("Receive Access control request failed on Requester email")
        expect(switch).to_be_checked()
        expect(page.get_by_text("Requester email · 1 in 30 days")).to_be_visible()
        _fits(page)
        page.screenshot(path=str(tmp_path / "preferences-phone.png"), full_page=True)

        switch.uncheck()
        page.get_by_label("Only in these hours").check()
        page.get_by_label("Sat").check()
        page.get_by_label("From").fill("08:30")
        page.get_by_label("To").fill("18:00")
        page.get_by_label("Time zone").select_option("Europe/Rome")  # a choice from the IANA list
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("status")).to_contain_text("Saved.")
        expect(page.get_by_label("Receive Access control request failed on Requester email")).not_to_be_checked()
        expect(page.get_by_label("Time zone")).to_have_value("Europe/Rome")
        page.screenshot(path=str(tmp_path / "preferences-phone-saved.png"), full_page=True)

        stored = _stored(base)
        assert stored["optOuts"] == [{"kind": KIND, "channel": "requester-email"}]
        assert stored["activeHours"] == [
            {
                "times": [{"start_time": "08:30", "end_time": "18:00"}],
                "weekdays": ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday"],
                "location": "Europe/Rome",
            }
        ]
    keep_screenshots(tmp_path)
    assert not console, f"the browser reported: {console}"


@pytest.mark.parametrize("browser_page", [{"width": 1280, "height": 800}], indirect=True)
def test_one_click_unsubscribe_confirm_then_undo_in_a_browser(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink, browser_page: Page, tmp_path: Path
) -> None:
    rt, _, unsubscribe = _mail_links(make_runtime, tmp_path, smtp)
    page = browser_page
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type in ("error", "warning") else None)
    with serving(create_app(rt)) as base:
        page.goto(base + unsubscribe)
        expect(page.get_by_role("heading", name="Unsubscribe?")).to_be_visible()
        page.screenshot(path=str(tmp_path / "unsubscribe-confirm.png"), full_page=True)
        assert _stored(base)["optOuts"] == []  # the GET changed nothing
        page.get_by_role("button", name="Unsubscribe").click()
        expect(page.get_by_role("status")).to_contain_text("You will no longer receive")
        page.screenshot(path=str(tmp_path / "unsubscribe-done.png"), full_page=True)
        assert _stored(base)["optOuts"] == [{"kind": KIND, "channel": "requester-email"}]
        page.get_by_role("button", name="Undo: receive them again").click()
        expect(page.get_by_role("status")).to_contain_text("again")
        assert _stored(base)["optOuts"] == []
        page.get_by_role("link", name="Manage all your notifications").click()
        expect(page.get_by_role("heading", name="Your notifications")).to_be_visible()
    keep_screenshots(tmp_path)
    assert not console, f"the browser reported: {console}"
