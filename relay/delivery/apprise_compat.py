"""What Apprise does not tell or cannot do, in one place: docs/development.md ("Upgrading dependencies") says
what each part leans on and why, and `tests/delivery/test_apprise_compat.py` fails when one stops working.

1. The answers behind a failed send (the HTTP status, a `Retry-After`, Slack's `ok: false` error) and where and
   why it failed (host and port, a network failure's cause, an SMTP server's reply), noted per thread by
   observers on `requests.Session.send` and `smtplib.SMTP` that record only inside a send (`watch`) and change
   nothing; never a URL's path, query or user part (they may hold tokens).
2. An HTML e-mail with our own text part (`send_email`: Apprise's `NotifyEmail.prepare_emails`, the text part
   swapped, sent with Apprise's SMTP controller; `takes_own_text_part`: not one Apprise encrypts with PGP).
3. A fresh service object per send (a shared one throttles between sends), its URL parsed once (`service`).
4. Threads (relay.threads): the message Slack posted, read from its answer (`answers.posted`); `reply_broadcast`
   added to a Slack reply (`watch(broadcast=True)`); relay's headers on an e-mail (its Message-ID for Apprise's).
"""

from __future__ import annotations

import copy
import json
import logging
import smtplib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_string
from email.message import Message
from email.mime.text import MIMEText
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any, TypeGuard, cast

import apprise
import requests
from apprise import NotifyBase
from apprise import plugins as apprise_plugins
from apprise.exception import AppriseException
from apprise.plugins.email import AppriseEmailException, NotifyEmail
from apprise.plugins.email.base import PGP_MODE_DEFAULT
from apprise.plugins.email.smtp import AppriseSMTPController

from relay.core.clock import system_clock
from relay.core.outcome import Delivered, Outcome, Permanent, Transient
from relay.delivery.answers import api_error, network_failure, posted, where, words_of

MAX_WAIT = 24 * 3600.0
_TRANSIENT_CODES = frozenset({408, 425, 429})
# Slack Web API errors (an `ok: false` answer) that a retry can mend; every other one is permanent.
_SLACK_TRANSIENT = frozenset({"ratelimited", "rate_limited", "service_unavailable", "internal_error", "fatal_error"})
_local = threading.local()


@dataclass
class Seen:
    statuses: list[int] = field(default_factory=list)
    retry_after: float | None = None
    api_errors: list[tuple[str, str]] = field(default_factory=list)  # (code, text) of `ok: false` answers
    unanswered: int = 0  # requests that got no answer (a network error, a timeout)
    warnings: list[str] = field(default_factory=list)
    # What went wrong, where (host:port), in relay's words: "127.0.0.1:8025 answered HTTP 503 Service
    # Unavailable: overloaded", "connection to 127.0.0.1:9 refused", "SMTP server 127.0.0.1:25 answered 451 ...".
    failures: list[str] = field(default_factory=list)
    said: str | None = None  # the last refusing answer's own words (an HTTP reason and body, an SMTP reply)
    smtp_code: int | None = None  # the last SMTP reply that refused (4xx, 5xx)
    smtp_server: str = ""  # host:port of the SMTP session
    unsupported: str | None = None  # what the SMTP server lacks that the channel's URL asks for (AUTH)
    posted: str | None = None  # Slack's `<channel id>:<ts>` of the message chat.postMessage posted
    broadcast: bool = False  # a Slack reply is shown in the channel too (`reply_broadcast`)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After value: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_WAIT)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    # The server's date against the wall clock: what comes of it is a wait, counted on relay's clock.
    return min(max(0.0, when - (now if now is not None else system_clock())), MAX_WAIT)


def _note(response: Any, streamed: bool) -> None:
    seen: Seen | None = getattr(_local, "seen", None)
    if seen is None:
        return
    status = int(response.status_code)
    seen.statuses.append(status)
    if status >= 300:
        words = " ".join(str(response.reason or "").split())
        if not streamed:
            body = words_of(response.content)
            words = f"{words}: {body}" if words and body else words or body
        seen.said = words or None
        seen.failures.append(f"{where(str(response.url))} answered HTTP {status}" + (f" {words}" if words else ""))
    if status in (429, 503):
        wait = parse_retry_after(response.headers.get("Retry-After"))
        if wait is not None:
            seen.retry_after = wait if seen.retry_after is None else max(seen.retry_after, wait)
    if not streamed:  # reading a streamed answer here would take it from its caller
        found = api_error(str(response.url), response.content)
        if found is not None:
            seen.api_errors.append(found)
        seen.posted = posted(str(response.url), response.content) or seen.posted


def _broadcast(request: Any) -> None:
    """A Slack reply shown in the channel too: Apprise's Slack plugin has no `reply_broadcast`."""
    body = json.loads(request.body) if str(request.url).endswith("/chat.postMessage") and request.body else None
    if isinstance(body, dict) and "thread_ts" in body:
        request.prepare_body(None, None, json={**body, "reply_broadcast": True})


def _install_observer() -> None:
    original = requests.Session.send

    def send(self: requests.Session, request: Any, **kwargs: Any) -> Any:
        if getattr(getattr(_local, "seen", None), "broadcast", False):
            _broadcast(request)
        try:
            response = original(self, request, **kwargs)
        except Exception as exc:
            seen: Seen | None = getattr(_local, "seen", None)
            if seen is not None:
                seen.unanswered += 1
                seen.failures.append(f"connection to {where(str(request.url))} {network_failure(exc)}")
            raise
        _note(response, bool(kwargs.get("stream")))
        return response

    requests.Session.send = send  # type: ignore[method-assign]


def _smtp_refusal(seen: Seen, code: int, text: bytes | str) -> None:
    words = words_of(text)
    seen.smtp_code, seen.said = code, f"{code} {words}".strip()
    seen.failures.append(f"SMTP server {seen.smtp_server or 'the SMTP server'} answered {seen.said}")


def _observe_smtp(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def observed(self: smtplib.SMTP, *args: Any, **kwargs: Any) -> Any:
        seen: Seen | None = getattr(_local, "seen", None)
        if seen is None:
            return original(self, *args, **kwargs)
        if name == "connect":
            host = str(args[0] if args else kwargs.get("host", "localhost"))
            port = args[1] if len(args) > 1 else kwargs.get("port", 0)
            seen.smtp_server = where(f"//{f'[{host}]' if ':' in host else host}:{port or smtplib.SMTP_PORT}")
        try:
            answer = original(self, *args, **kwargs)
        except smtplib.SMTPRecipientsRefused as exc:
            for code, text in list(exc.recipients.values())[-1:]:
                _smtp_refusal(seen, code, text)
            raise
        except smtplib.SMTPResponseException as exc:
            _smtp_refusal(seen, exc.smtp_code, exc.smtp_error)
            raise
        except smtplib.SMTPNotSupportedError as exc:  # credentials for a server with no AUTH: the channel's config
            seen.unsupported = f"SMTP server {seen.smtp_server or '?'}: {exc}"
            seen.failures.append(seen.unsupported)
            raise
        except OSError as exc:
            seen.unanswered += 1
            seen.failures.append(f"connection to SMTP server {seen.smtp_server or '?'} {network_failure(exc)}")
            raise
        if name == "sendmail" and isinstance(answer, dict) and answer:  # some recipients refused
            for code, text in list(answer.values())[-1:]:
                _smtp_refusal(seen, code, text)
        return answer

    return observed


def _install_smtp_observer() -> None:
    for name in ("connect", "starttls", "login", "sendmail"):
        setattr(smtplib.SMTP, name, _observe_smtp(name, getattr(smtplib.SMTP, name)))


class _Warnings(logging.Handler):
    """Apprise's warnings and errors of this thread's send (those it marks as not for capture stay out)."""

    def emit(self, record: logging.LogRecord) -> None:
        seen: Seen | None = getattr(_local, "seen", None)
        if seen is not None and getattr(record, "apprise_capture", True):
            seen.warnings.append(record.getMessage())


@contextmanager
def watch(broadcast: bool = False) -> Iterator[Seen]:
    """Note what the services answer to the requests this thread makes inside the block."""
    outer = getattr(_local, "seen", None)
    _local.seen = seen = Seen(broadcast=broadcast)
    try:
        yield seen
    finally:
        _local.seen = outer


def transient_status(status: int | None) -> bool:
    """No status (a network error), 408, 425, 429 and 5xx are worth retrying."""
    return status is None or status in _TRANSIENT_CODES or status >= 500


def outcome(ok: bool, seen: Seen, reason: str, scrub: Callable[[str], str] = str) -> Outcome:
    """`reason`: Apprise's account, already scrubbed; `scrub` takes secrets out of what the services said."""
    if ok:
        return Delivered(seen.posted)
    told = scrub("; ".join(dict.fromkeys(seen.failures)))
    reason = "; ".join(r for r in (told, reason) if r)[:1000] or "send failed"
    said = scrub(seen.said) if seen.said else None
    status = next((s for s in reversed(seen.statuses) if s >= 300), None)  # the last that failed
    if seen.api_errors:
        code, text = seen.api_errors[-1]
        reason = f"{text}; {reason}"[:1000]
        if status is None:  # answered 200 with `ok: false`: the error code says whether to try again
            if code in _SLACK_TRANSIENT:
                return Transient(reason, seen.retry_after, said=code)
            return Permanent(reason, said=code)
    if seen.unsupported is not None:
        return Permanent(reason)
    if seen.smtp_code is not None:  # an SMTP 4xx may mend; a 5xx (bad credentials, sender refused) will not
        if seen.smtp_code >= 500:
            return Permanent(reason, seen.smtp_code, said)
        return Transient(reason, None, seen.smtp_code, said)
    if status is None and seen.statuses and not seen.unanswered:
        return Permanent(reason, seen.statuses[-1], said)  # answered, yet refused: trying again will not help
    if transient_status(status):
        return Transient(reason, seen.retry_after if status in (429, 503) else None, status, said)
    return Permanent(reason, status, said)


def with_text_part(raw: str, text: str | None, headers: dict[str, str] | None = None) -> str:
    """An e-mail Apprise prepared, with relay's `headers` (its Message-ID replacing Apprise's) and, for an html one,
    its derived text/plain alternative replaced by `text`."""
    message = message_from_string(raw)
    for name, value in (headers or {}).items():
        del message[name]
        message[name] = value
    parts = message.get_payload() if message.get_content_type() == "multipart/alternative" else None
    if text is not None and isinstance(parts, list) and parts and isinstance(parts[0], Message):
        parts[0] = MIMEText(text, "plain", "utf-8") if parts[0].get_content_type() == "text/plain" else parts[0]
    return message.as_string()


def prepared(obj: NotifyEmail, title: str, body: str, fmt: Any = apprise.NotifyFormat.HTML) -> Any:
    """The plugin's own messages for an e-mail, built from its attributes (`prepare_emails`)."""
    return NotifyEmail.prepare_emails(
        subject=title,
        body=body,
        notify_format=fmt,
        from_addr=obj.from_addr,
        to=obj.targets,
        cc=obj.cc,
        bcc=obj.bcc,
        reply_to=obj.reply_to,
        smtp_host=obj.smtp_host,
        headers={"X-Application": obj.app_id, **obj.headers},
        names=obj.names,
    )


def send_email(
    obj: NotifyEmail, title: str, body: str, text: str | None, scrub: Callable[[str], str], **mail: Any
) -> Outcome:
    """An e-mail with relay's text part (an html one's) and `mail["headers"]`, in `mail["fmt"]` (Apprise's
    NotifyFormat, default html). `scrub` takes the URL's secrets out of an error text."""
    failed: list[str] = []
    with watch() as seen:
        try:
            messages = prepared(obj, title, body, mail.get("fmt", apprise.NotifyFormat.HTML))
            with AppriseSMTPController(
                host=obj.smtp_host,
                port=int(obj.port or 0),
                secure_mode=str(obj.secure_mode),
                user=obj.user,
                password=obj.password,
                verify_certificate=obj.verify_certificate,
                socket_connect_timeout=int(obj.socket_connect_timeout),
            ) as smtp:
                for message in messages:
                    if not smtp.sendmail(
                        str(obj.from_addr[1]), message.to_addrs, with_text_part(message.body, text, mail.get("headers"))
                    ):
                        failed.append(message.recipient)
        # What smtplib and sockets raise (Apprise's controller lets them through), and Apprise's own.
        except (OSError, smtplib.SMTPException, RuntimeError, AppriseEmailException, AppriseException) as exc:
            if not seen.failures:  # not a refusal or network failure the observer saw: Apprise's own words
                seen.failures.append(f"e-mail to {obj.smtp_host} failed: {str(exc) or type(exc).__name__}")
            return outcome(False, seen, "", scrub)
    if failed:
        return outcome(False, seen, f"the SMTP server did not accept the e-mail to {', '.join(failed)}", scrub)
    return Delivered()


logging.getLogger("apprise").addHandler(_Warnings(logging.WARNING))
_install_observer()  # once, as the module is first imported (under Python's import lock)
_install_smtp_observer()


@lru_cache(maxsize=1024)
def _parsed(url: str) -> dict[str, Any] | None:
    return cast("dict[str, Any] | None", apprise_plugins.url_to_dict(url, secure_logging=True))  # type: ignore[no-untyped-call]


def service(url: str) -> NotifyBase | None:
    """None: no plugin takes it. Each gets its own copy of the parse: a plugin may change its arguments."""
    parsed = _parsed(url)
    if parsed is None:
        return None
    return apprise.Apprise.instantiate(copy.deepcopy(parsed), suppress_exceptions=False)


def takes_own_text_part(obj: NotifyBase) -> TypeGuard[NotifyEmail]:
    """An e-mail that `send_email` can give relay's text part: a plain one, not one Apprise encrypts."""
    return isinstance(obj, NotifyEmail) and obj.pgp_mode == PGP_MODE_DEFAULT
