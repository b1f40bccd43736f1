"""What each channel receives: Slack Block Kit, a Teams Adaptive Card, and multipart e-mail.

Slack and Teams cannot be reached from here: `responses` intercepts Apprise's HTTP call and the test
asserts the exact JSON. E-mail goes to a real SMTP server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import responses
from starlette.testclient import TestClient

from relay.core.model import Delivery, Notification
from relay.core.outcome import Delivered, Permanent, Transient
from relay.core.rendering import Rendered, Renderer
from relay.delivery.channels import native_url, send
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import post, run_worker, sample_notification
from tests.servers import SmtpSink

SLACK_URL = "slack://T1234ABCD/B1234ABCD/abcdefghijklmnopqrstuvwx"
SLACK_HOOK = "https://hooks.slack.com/services/T1234ABCD/B1234ABCD/abcdefghijklmnopqrstuvwx"
TEAMS_URL = "workflows://prod-01.westeurope.logic.azure.com:443/abc123def/signatureXYZ"
TEAMS_HOST = "https://prod-01.westeurope.logic.azure.com:443/workflows/abc123def/triggers/manual/paths/invoke"
APPRISE_ICON = "https://github.com/caronc/apprise/raw/master/apprise/assets/themes/default/apprise-info-{}.png"
TITLE = "Access request failed: Invoices SQL output port"
MD = "The access request by **Alice Rossi** failed.\n\n- **System:** Invoices 1.2.0\n\n[Open](https://p.example.com/x)"


@pytest.fixture
def http() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock() as mock:
        yield mock


def posted(mock: responses.RequestsMock) -> Any:
    assert len(mock.calls) == 1
    body = mock.calls[0].request.body
    assert isinstance(body, str | bytes)
    return json.loads(body)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (SLACK_URL, SLACK_URL + "?blocks=yes"),
        (SLACK_URL + "?footer=no", SLACK_URL + "?footer=no&blocks=yes"),
        (SLACK_URL + "?blocks=no", SLACK_URL + "?blocks=no"),
        (SLACK_URL + "?template=/etc/relay/card.json", SLACK_URL + "?template=/etc/relay/card.json"),
        # A channel is part of Apprise's path, not a URL fragment: the query goes after it.
        (SLACK_URL + "/#alerts", SLACK_URL + "/#alerts?blocks=yes"),
        (SLACK_URL + "/#alerts?footer=no", SLACK_URL + "/#alerts?footer=no&blocks=yes"),
        (TEAMS_URL, TEAMS_URL),
    ],
)
def test_native_url_asks_slack_for_block_kit_unless_the_operator_chose(url: str, expected: str) -> None:
    assert native_url(url, "md") == expected
    assert native_url(url, "txt") == url


def test_slack_gets_block_kit(http: responses.RequestsMock) -> None:
    http.add(responses.POST, SLACK_HOOK, body="ok")
    assert isinstance(send(SLACK_URL, TITLE, MD, "md"), Delivered)
    assert posted(http) == {
        "attachments": [
            {
                "blocks": [
                    {"type": "header", "text": {"type": "plain_text", "text": TITLE, "emoji": True}},
                    {
                        "type": "section",
                        "text": {
                            "type": "mrkdwn",
                            "text": "The access request by *Alice Rossi* failed.\n\n- *System:* Invoices 1.2.0\n\n"
                            "<https://p.example.com/x|Open>",
                        },
                    },
                    {
                        "type": "context",
                        "elements": [
                            {"type": "image", "image_url": APPRISE_ICON.format("72x72"), "alt_text": "info"},
                            {"type": "mrkdwn", "text": "Apprise"},
                        ],
                    },
                ],
                "color": "#3AA3E3",
            }
        ],
        "icon_url": APPRISE_ICON.format("72x72"),
    }


def test_slack_without_branding_when_the_url_says_so(http: responses.RequestsMock) -> None:
    http.add(responses.POST, SLACK_HOOK, body="ok")
    assert isinstance(send(SLACK_URL + "?footer=no&image=no", TITLE, MD, "md"), Delivered)
    blocks = posted(http)["attachments"][0]["blocks"]
    assert [b["type"] for b in blocks] == ["header", "section"]


def test_teams_workflow_gets_an_adaptive_card(http: responses.RequestsMock) -> None:
    http.add(responses.POST, re.compile(r"https://prod-01\.westeurope\.logic\.azure\.com(:443)?/.*"))
    assert isinstance(send(TEAMS_URL, TITLE, MD, "md"), Delivered)
    assert http.calls[0].request.url is not None
    assert http.calls[0].request.url.startswith(TEAMS_HOST + "?")
    assert "sig=signatureXYZ" in http.calls[0].request.url
    assert posted(http) == {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": {
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.4",
                    "body": [
                        {"type": "Image", "url": APPRISE_ICON.format("32x32"), "height": "32px", "altText": "info"},
                        {
                            "type": "TextBlock",
                            "text": TITLE,
                            "style": "heading",
                            "weight": "Bolder",
                            "size": "Large",
                            "id": "title",
                        },
                        {"type": "TextBlock", "text": MD, "style": "default", "wrap": True, "id": "body"},
                    ],
                    "msteams": {"width": "full"},
                },
            }
        ],
    }


# --- payload values are text, not markup ----------------------------------------------------------

EVE = "<!channel> Eve <https://evil.example|re-login here>"  # an @channel ping and a disguised link in Slack
RESOURCE = "Invoices [re-login](https://evil.example)"  # a disguised link in Teams
FIELDS = (
    "- *Resource URN:* urn:dmb:cmp:finance:invoices:1:output-port-sql\n- *System:* Invoices 1.2.0\n"
    "- *Domain:* finance\n- *Environment:* production\n- *Requested at:* 2026-11-20 09:14 UTC\n"
    "- *Requested for:* {eve}, analytics-team {group}\n- *Reason:* Quarterly close analysis"
)  # Requested for: people by name (the payload's for Alice, hostile here too), a group readable
OPEN = "https://platform.example.com/marketplace/systems/urn:dmb:dp:finance:invoices:1"


def hostile_rendering() -> Rendered:
    """The system owner's message from relay's shipped md template, with hostile names in the payload."""
    data = sample_notification()
    data["body"]["requester"]["displayName"] = EVE
    data["body"]["requestedResource"]["consumableInterface"]["displayName"] = RESOURCE
    notification = Notification.model_validate(data)
    rtype = notification.messages[0].recipientType_v2
    record = Delivery("d1", "e1", notification.kind, 0, "owners", "auto", 3, 0.0, 0.0, rtype)
    rendered = Renderer(None, {"platform_url": "https://platform.example.com"}).render(notification, record, "md")
    assert rendered.template == "access-control-request-failed/system-owner.md.j2"
    return rendered


def test_payload_values_reach_slack_as_text_with_no_ping_and_no_link(http: responses.RequestsMock) -> None:
    http.add(responses.POST, SLACK_HOOK, body="ok")
    rendered = hostile_rendering()
    assert isinstance(send(SLACK_URL, rendered.title, rendered.body, "md"), Delivered)
    header, section = posted(http)["attachments"][0]["blocks"][:2]
    assert header["text"] == {"type": "plain_text", "text": f"Access request failed: {RESOURCE}", "emoji": True}
    # Slack shows &lt; &gt; &amp; as < > &: the same words, with no @channel and no link but the template's own.
    eve = "&lt;!channel&gt; Eve &lt;https://evil.example|re-login here&gt;"
    assert section["text"] == {
        "type": "mrkdwn",
        "text": f"The access request by *{eve}* for *{RESOURCE}* (Invoices 1.2.0, production) failed.\n\n"
        f"You receive this because you own Invoices.\n\n- *Requester:* {eve}\n- *Resource:* {RESOURCE}\n"
        f"{FIELDS.format(eve=eve, group='(group)')}\n\nPlease review the request and the system's access settings.\n\n"
        f"<{OPEN}|Open Invoices in the platform>",
    }


def test_payload_values_reach_a_teams_card_as_text_with_no_link(http: responses.RequestsMock) -> None:
    http.add(responses.POST, re.compile(r"https://prod-01\.westeurope\.logic\.azure\.com(:443)?/.*"))
    rendered = hostile_rendering()
    assert isinstance(send(TEAMS_URL, rendered.title, rendered.body, "md"), Delivered)
    title, body = posted(http)["attachments"][0]["content"]["body"][1:]
    # A card's TextBlocks are markdown, its title too: CommonMark's backslash escapes show the characters.
    resource = "Invoices \\[re-login\\]\\(https://evil.example\\)"
    eve = "\\<!channel\\> Eve \\<https://evil.example|re-login here\\>"
    assert title["text"] == f"Access request failed: {resource}"
    assert body["text"] == (
        f"The access request by **{eve}** for **{resource}** (Invoices 1.2.0, production) failed.\n\n"
        f"You receive this because you own Invoices.\n\n- **Requester:** {eve}\n- **Resource:** {resource}\n"
        + FIELDS.format(eve=eve, group="\\(group\\)").replace("*", "**")
        + f"\n\nPlease review the request and the system's access settings.\n\n[Open Invoices in the platform]({OPEN})"
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (SLACK_URL, "&lt;!channel&gt; Eve &lt;https://evil.example|re-login here&gt; &amp; [x](https://e.example)"),
        (
            TEAMS_URL,
            "<\\!channel\\> Eve <https://evil\\.example\\|re\\-login here\\> & \\[x\\]\\(https://e\\.example\\)",
        ),
    ],
)
def test_the_platforms_own_text_is_sent_as_text(http: responses.RequestsMock, url: str, expected: str) -> None:
    """With no template the platform's text goes as plain text, which Apprise escapes for each service (a
    guard: this held before relay escaped template values)."""
    http.add(responses.POST, re.compile(r"https://.*"), body="ok")
    assert isinstance(send(url, "T", f"{EVE} & [x](https://e.example)", "txt"), Delivered)
    sent = posted(http)
    text = sent["attachments"][0]["text"] if url == SLACK_URL else sent["attachments"][0]["content"]["body"][2]["text"]
    assert text == expected


def test_slack_failure_is_reported_without_the_token(http: responses.RequestsMock) -> None:
    http.add(responses.POST, SLACK_HOOK, status=403, body="invalid_token")
    result = send(SLACK_URL, TITLE, MD, "md")
    assert isinstance(result, Permanent)
    assert "abcdefghijklmnopqrstuvwx" not in result.reason


# --- e-mail -------------------------------------------------------------------------------------


def test_email_text_part_is_the_one_given(smtp: SmtpSink) -> None:
    smtp.clear()
    url = smtp.url() + "&to=alice.rossi@example.com"
    result = send(url, "Títle & <more>", "<p>Hello <b>there</b></p>", "html", "Hello there, in plain words.")
    assert isinstance(result, Delivered), result
    (mail,) = smtp.mails
    assert mail.message.get_content_type() == "multipart/alternative"
    assert mail.subject == "Títle & <more>"
    assert (mail.part("text/plain") or "").strip() == "Hello there, in plain words."
    assert (mail.part("text/html") or "").strip() == "<p>Hello <b>there</b></p>"


def test_email_without_text_part_derives_it_from_html(smtp: SmtpSink) -> None:
    smtp.clear()
    assert isinstance(
        send(smtp.url() + "&to=alice.rossi@example.com", "T", "<p>Hello <b>there</b></p>", "html"), Delivered
    )
    (mail,) = smtp.mails
    assert "Hello there" in (mail.part("text/plain") or "")


def test_email_to_an_unreachable_server_is_transient_and_redacted() -> None:
    url = "mailto://relay:s3cretpassw0rd@127.0.0.1:1?from=relay@example.com&to=a@example.com&mode=insecure&cto=1"
    result = send(url, "T", "<p>x</p>", "html", "x")
    assert isinstance(result, Transient)
    assert "s3cretpassw0rd" not in result.reason


def test_email_through_the_worker_has_both_parts_from_the_templates(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink
) -> None:
    rt = make_runtime(templates={"dir": "unused", "builtin": True})
    with TestClient(create_app(rt)) as client:
        assert post(client, sample_notification()).status_code == 202
        run_worker(rt)
    (mail,) = smtp.mails
    assert mail.envelope_to == ["alice.rossi@example.com"]
    assert mail.subject == "Your access request failed: Invoices SQL output port"
    text = mail.part("text/plain") or ""
    html = mail.part("text/html") or ""
    assert text.startswith("Your request for access to Invoices SQL output port (Invoices 1.2.0, production) failed.")
    assert "Requester:     Alice Rossi" in text
    assert "<" not in text
    assert '<table role="presentation"' in html
    assert "Contact the system owner, Bruno Verdi" in html
