"""relay.delivery.apprise_compat: what relay reads behind Apprise's True/False, for each channel's real
failure answers. These fail when a new Apprise or requests changes what relay relies on (see docs/development.md,
"Upgrading dependencies")."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
import responses

from relay.core.outcome import Delivered, Permanent, Transient
from relay.delivery import answers, apprise_compat
from relay.delivery.channels import send
from tests.servers import HttpSink, SmtpSink, free_port

SLACK_HOOK_URL = "slack://T1234ABCD/B1234ABCD/abcdefghijklmnopqrstuvwx"
SLACK_HOOK = "https://hooks.slack.com/services/T1234ABCD/B1234ABCD/abcdefghijklmnopqrstuvwx"
SLACK_BOT_DM = "slack://xoxb-1234-5678-abcdefghijkl/alice@example.com"
TEAMS_URL = "workflows://prod-01.westeurope.logic.azure.com:443/abc123def/signatureXYZ"
TEAMS_HOST = "https://prod-01.westeurope.logic.azure.com:443/workflows/abc123def/triggers/manual/paths/invoke"


@pytest.fixture
def http() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


def test_the_observer_is_on_requests_and_sees_only_sends() -> None:
    """It wraps `requests.Session.send`, which Apprise's plugins reach through `requests.post`."""
    assert requests.Session.send.__qualname__.endswith("_install_observer.<locals>.send")
    seen_outside = getattr(apprise_compat._local, "seen", None)
    assert seen_outside is None


# --- generic web hooks, a real local server ----------------------------------------------------


def test_a_429_with_retry_after_is_transient_and_says_how_long(sink: HttpSink) -> None:
    sink.script["/hook"] = [429]
    sink.retry_after["/hook"] = "7"
    outcome = send(sink.url("/hook"), "t", "b", "txt")
    assert isinstance(outcome, Transient) and outcome.retry_after == 7.0 and outcome.status == 429


def test_a_503_is_transient_and_a_404_permanent(sink: HttpSink) -> None:
    sink.script["/hook"] = [503, 404]
    first = send(sink.url("/hook"), "t", "b", "txt")
    second = send(sink.url("/hook"), "t", "b", "txt")
    assert isinstance(first, Transient) and first.status == 503 and first.retry_after is None
    assert isinstance(second, Permanent) and second.status == 404
    assert isinstance(send(sink.url("/hook"), "t", "b", "txt"), Delivered)


# --- Slack ---------------------------------------------------------------------------------------


def test_slack_429_is_transient_with_its_retry_after(http: responses.RequestsMock) -> None:
    http.add(responses.POST, SLACK_HOOK, status=429, headers={"Retry-After": "30"}, body="rate_limited")
    outcome = send(SLACK_HOOK_URL, "t", "b", "md")
    assert isinstance(outcome, Transient) and outcome.retry_after == 30.0


def test_slack_404_is_permanent(http: responses.RequestsMock) -> None:
    http.add(responses.POST, SLACK_HOOK, status=404, body="no_service")
    outcome = send(SLACK_HOOK_URL, "t", "b", "md")
    assert isinstance(outcome, Permanent) and outcome.status == 404


def test_slack_invalid_auth_is_permanent_and_named(http: responses.RequestsMock) -> None:
    http.add(responses.POST, "https://slack.com/api/users.lookupByEmail", json={"ok": True, "user": {"id": "U1"}})
    http.add(responses.GET, "https://slack.com/api/users.lookupByEmail", json={"ok": True, "user": {"id": "U1"}})
    http.add(responses.POST, "https://slack.com/api/chat.postMessage", json={"ok": False, "error": "invalid_auth"})
    outcome = send(SLACK_BOT_DM, "t", "b", "md")
    assert isinstance(outcome, Permanent) and "invalid_auth" in outcome.reason


def test_slack_users_not_found_is_permanent_and_named(http: responses.RequestsMock) -> None:
    missing = {"ok": False, "error": "users_not_found"}
    http.add(responses.POST, "https://slack.com/api/users.lookupByEmail", json=missing)
    http.add(responses.GET, "https://slack.com/api/users.lookupByEmail", json=missing)
    outcome = send(SLACK_BOT_DM, "t", "b", "md")
    assert isinstance(outcome, Permanent) and "users_not_found" in outcome.reason
    assert not [c for c in http.calls if "chat.postMessage" in c.request.url]


def test_slack_ratelimited_in_an_ok_false_answer_is_transient(http: responses.RequestsMock) -> None:
    http.add(responses.POST, "https://slack.com/api/users.lookupByEmail", json={"ok": True, "user": {"id": "U1"}})
    http.add(responses.GET, "https://slack.com/api/users.lookupByEmail", json={"ok": True, "user": {"id": "U1"}})
    http.add(responses.POST, "https://slack.com/api/chat.postMessage", json={"ok": False, "error": "ratelimited"})
    assert isinstance(send(SLACK_BOT_DM, "t", "b", "md"), Transient)


# --- Microsoft Teams (Power Automate workflows) ---------------------------------------------------


def test_teams_400_is_permanent_and_429_transient_with_retry_after(http: responses.RequestsMock) -> None:
    http.add(responses.POST, TEAMS_HOST, status=400, body=json.dumps({"error": {"code": "InvalidRequestContent"}}))
    http.add(responses.POST, TEAMS_HOST, status=429, headers={"Retry-After": "12"})
    first = send(TEAMS_URL, "t", "b", "md")
    second = send(TEAMS_URL, "t", "b", "md")
    assert isinstance(first, Permanent) and first.status == 400
    assert isinstance(second, Transient) and second.status == 429 and second.retry_after == 12.0


# --- e-mail, a real SMTP server --------------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "the text part"])
def test_smtp_refusals_of_a_message_keep_the_code_and_the_servers_words(smtp: SmtpSink, text: str | None) -> None:
    """Apprise's SMTP controller keeps the reply at debug level; the observer on `smtplib.SMTP` reads it, on
    Apprise's own send (text None) and on relay's (its own text part). Breaks when Apprise stops talking SMTP
    through `smtplib.SMTP`: a 4xx is tried again, a 5xx is not."""
    url = smtp.url() + "&to=bob@example.com"
    smtp.clear()
    smtp.answers[:] = ["451 4.3.0 try again later", "554 5.7.1 rejected by policy"]
    first = send(url, "t", "<p>b</p>", "html", text)
    second = send(url, "t", "<p>b</p>", "html", text)
    assert isinstance(first, Transient) and first.status == 451
    assert f"SMTP server 127.0.0.1:{smtp.port} answered 451 4.3.0 try again later" in first.reason
    assert first.said == "451 4.3.0 try again later"
    assert isinstance(second, Permanent) and second.status == 554 and "554 5.7.1 rejected by policy" in second.reason
    assert isinstance(send(url, "t", "<p>b</p>", "html", text), Delivered)
    assert len(smtp.mails) == 1


@pytest.mark.parametrize("text", [None, "the text part"])
def test_a_refused_smtp_port_is_named_with_its_port_and_no_password(text: str | None) -> None:
    port = free_port()
    url = f"mailto://bob:Pa55word-9@127.0.0.1:{port}?from=relay@example.com&mode=insecure&to=al@example.com"
    outcome = send(url, "t", "<p>b</p>", "html", text)
    assert isinstance(outcome, Transient)
    assert f"connection to SMTP server 127.0.0.1:{port} refused" in outcome.reason
    assert "Pa55word-9" not in outcome.reason


@pytest.mark.parametrize("text", [None, "the text part"])
def test_credentials_for_a_server_without_auth_are_a_permanent_failure(smtp: SmtpSink, text: str | None) -> None:
    """The channel's URL gives a user and a password, and the server offers no AUTH: smtplib refuses to log in
    (SMTPNotSupportedError). That is the channel's configuration, not a passing fault: no retry, and the channel
    is not marked down for it."""
    url = smtp.url().replace("mailto://", "mailto://bob:Pa55word-9@") + "&to=bob@example.com"
    smtp.clear()
    outcome = send(url, "t", "<p>b</p>", "html", text)
    assert isinstance(outcome, Permanent), outcome
    assert f"SMTP server 127.0.0.1:{smtp.port}" in outcome.reason and "AUTH" in outcome.reason
    assert "Pa55word-9" not in outcome.reason and smtp.mails == []


# --- where and why a web hook failed ------------------------------------------------------------


def test_a_refused_port_is_named_with_host_port_and_refusal_and_no_secret() -> None:
    """Apprise says only `A Connection error occurred sending JSON notification to 127.0.0.1.`"""
    port = free_port()
    outcome = send(f"json://user:S3cretPass@127.0.0.1:{port}/hook?token=T0kenValue42", "t", "b", "txt")
    assert isinstance(outcome, Transient) and outcome.status is None
    assert outcome.reason.startswith(f"connection to 127.0.0.1:{port} refused")
    assert "S3cretPass" not in outcome.reason and "T0kenValue42" not in outcome.reason


def test_an_http_503_is_named_with_host_port_status_and_the_services_words(sink: HttpSink) -> None:
    sink.script["/hook"] = [503]
    outcome = send(sink.url("/hook"), "t", "b", "txt")
    assert isinstance(outcome, Transient) and outcome.status == 503
    assert outcome.reason.startswith(f"127.0.0.1:{sink.port} answered HTTP 503 Service Unavailable")
    assert outcome.said == "Service Unavailable: ok"  # the reason phrase and the body


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://u:p@hooks.example.com/services/T0KEN?x=1", "hooks.example.com:443"),
        ("http://127.0.0.1:8025/a", "127.0.0.1:8025"),
        ("http://[::1]:9/a", "[::1]:9"),
        ("http://h:notaport/", "the service"),
    ],
)
def test_where_keeps_only_host_and_port(url: str, expected: str) -> None:
    assert answers.where(url) == expected


# --- a service object per send, its URL parsed once ---------------------------------------------------------


def test_a_service_is_made_fresh_from_apprises_own_parse_of_the_url(smtp: SmtpSink) -> None:
    """Breaks when Apprise's `plugins.url_to_dict` or `Apprise.instantiate` of its dict changes."""
    from apprise.plugins.email import NotifyEmail

    url = smtp.url() + "&to=bob@example.com"
    first, second = apprise_compat.service(url), apprise_compat.service(url)
    assert isinstance(first, NotifyEmail) and isinstance(second, NotifyEmail)
    assert first is not second  # a shared one would throttle between sends
    assert first.url(privacy=True) == second.url(privacy=True)  # type: ignore[no-untyped-call]
    assert apprise_compat.takes_own_text_part(first)
    assert apprise_compat.service("nosuchscheme://x") is None
    hook = apprise_compat.service("json://127.0.0.1:9/hook")
    assert hook is not None and not apprise_compat.takes_own_text_part(hook)


def test_apprise_slack_posts_a_reply_to_a_thread_target_and_relay_reads_the_ts_and_adds_reply_broadcast(
    http: responses.RequestsMock,
) -> None:
    """What threads lean on (relay.threads): Apprise's `+<channel id>:<ts>` target posts `thread_ts`, the answer's
    `channel` and `ts` come back as `Delivered.posted`, and `broadcast` adds `reply_broadcast` to a reply only."""
    answer = {"ok": True, "channel": "C0OWNERS", "ts": "1700000000.000200"}
    http.add(responses.POST, "https://slack.com/api/chat.postMessage", json=answer)
    token = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
    first = send(f"slack://{token}/#owners", "T", "first", "md")
    reply = send(f"slack://{token}/+C0OWNERS:1700000000.000100", "T", "reply", "md", broadcast=True)
    assert first == reply == Delivered("C0OWNERS:1700000000.000200")
    bodies = [json.loads(call.request.body) for call in http.calls]
    assert "thread_ts" not in bodies[0] and "reply_broadcast" not in bodies[0]
    assert bodies[1]["channel"] == "C0OWNERS" and bodies[1]["thread_ts"] == "1700000000.000100"
    assert bodies[1]["reply_broadcast"] is True


@pytest.mark.parametrize("fmt", ["txt", "html"])
def test_apprise_makes_its_own_message_id_and_relay_sends_its_own_alone(smtp: SmtpSink, fmt: str) -> None:
    """Apprise's `prepare_emails` adds a Message-ID after any header given: relay's replaces it."""
    smtp.clear()
    mine = {"Message-ID": "<d1@example.com>", "In-Reply-To": "<d0@example.com>", "References": "<d0@example.com>"}
    sent = send(smtp.url() + "&to=a@example.com", "S", "<p>body</p>", fmt, "body", mail=lambda sender: mine)
    assert sent == Delivered()
    (mail,) = smtp.mails
    assert {k: mail.message.get_all(k) for k in mine} == {k: [v] for k, v in mine.items()}
