"""Apprise adapter: address a channel, send one delivery, classify the outcome, keep secrets out of errors."""

from __future__ import annotations

import copy
import logging
import re
import smtplib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email import message_from_string
from email.message import Message
from email.mime.text import MIMEText
from functools import lru_cache
from typing import Any, cast
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import apprise
from apprise import plugins as apprise_plugins
from apprise.exception import AppriseException
from apprise.plugins.base import NotifyBase
from apprise.plugins.email import AppriseEmailException, NotifyEmail
from apprise.plugins.email.base import PGP_MODE_DEFAULT
from apprise.plugins.email.smtp import SMTP_EXCEPTIONS, AppriseSMTPController

from relay.core.recipients import valid_email
from relay.core.redaction import url_secrets
from relay.delivery import keepalive, requests_env, retry_after
from relay.delivery.thread_scope import scoped

EMAIL_SCHEMES = frozenset({"mailto", "mailtos"})
CHAT_SCHEMES = frozenset(
    {
        "slack",
        "workflows",
        "workflow",
        "msteams",
        "discord",
        "mmost",
        "mmosts",
        "rocket",
        "rockets",
        "zulip",
        "matrix",
        "matrixs",
        "tgram",
        "guilded",
        "ryver",
        "gchat",
        "lark",
        "feishu",
    }
)
_FORMATS = {"txt": apprise.NotifyFormat.TEXT, "md": apprise.NotifyFormat.MARKDOWN, "html": apprise.NotifyFormat.HTML}
_STATUS = re.compile(r"error=(\d{3})")
_TRANSIENT_CODES = frozenset({408, 425, 429})


def scheme_of(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def channel_format(url: str, override: str | None = None) -> str:
    """The body format a channel takes: md for chat, html for e-mail, txt for everything else."""
    if override:
        return override
    scheme = scheme_of(url)
    if scheme in EMAIL_SCHEMES:
        return "html"
    if scheme in CHAT_SCHEMES:
        return "md"
    return "txt"


class AddressError(ValueError):
    pass


def address_url(url: str, address: str) -> str:
    """The channel URL aimed at one recipient: `to=` for e-mail, or a `{email}` placeholder.

    The address must pass the strict grammar first, so a payload can never add targets, hosts or
    parameters to the URL.
    """
    if not valid_email(address):
        raise AddressError("not a valid e-mail address")
    if "{email}" in url:
        return url.replace("{email}", quote(address, safe="@"))
    if scheme_of(url) not in EMAIL_SCHEMES:
        return url
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() != "to"]
    query.append(("to", address))
    return urlunsplit(parts._replace(query=urlencode(query, safe="@")))


def secret_parts(url: str) -> list[str]:
    """Pieces of a channel URL that may be credentials, in every form they may be shown in."""
    return url_secrets(url)


def redact(text: str, secrets: list[str]) -> str:
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret and len(secret) >= 4:
            text = text.replace(secret, "****")
    return text


def describe_url(url: str) -> str:
    """A channel URL safe to show: Apprise's privacy form, with custom header values scrubbed too."""
    try:
        obj = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    except Exception:
        obj = None
    if obj is None:
        return f"{scheme_of(url) or '?'}://****"
    shown = str(obj.url(privacy=True))  # type: ignore[no-untyped-call]
    return redact(shown, secret_parts(url))


def check_url(url: str) -> str | None:
    """None when Apprise accepts the URL, else the reason (with no secret in it)."""
    try:
        obj = apprise.Apprise.instantiate(url, suppress_exceptions=False)
    except Exception as exc:
        return redact(str(exc), secret_parts(url)) or type(exc).__name__
    if obj is None:
        return f"unsupported or malformed URL (scheme {scheme_of(url)!r})"
    return None


@dataclass(frozen=True)
class SendResult:
    ok: bool
    transient: bool = False
    error: str | None = None
    status_code: int | None = None
    retry_after: float | None = None  # seconds the service asked us to wait (429/503 Retry-After)


def classify(status_code: int | None) -> bool:
    """Whether a failure is worth retrying: no status (network), 408, 425, 429 and 5xx are."""
    if status_code is None:
        return True
    return status_code in _TRANSIENT_CODES or status_code >= 500


def native_url(url: str, fmt: str) -> str:
    """The URL that makes a channel post its native message: Block Kit for Slack markdown.

    An operator's own `blocks=` or `template=` on the URL wins.
    """
    if fmt != "md" or scheme_of(url) != "slack":
        return url
    # Not urlsplit: a Slack channel `/#alerts` is part of Apprise's path, where urlsplit sees a fragment
    # (the query would land before it and Apprise would post to its default channel).
    base, _, query = url.partition("?")
    keys = {k.lower() for k, _ in parse_qsl(query, keep_blank_values=True)}
    if keys & {"blocks", "template"}:
        return url
    return base + "?" + "&".join(q for q in (query, "blocks=yes") if q)


class _Warnings(logging.Handler):
    """Apprise's warnings and errors, kept per thread while a send runs: a send's failure reason (and
    the HTTP status relay classifies) is in them. Records Apprise marks as not for capture stay out."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        seen: list[str] | None = getattr(self.local, "seen", None)
        if seen is not None and getattr(record, "apprise_capture", True):
            seen.append(record.getMessage())

    @contextmanager
    def collect(self) -> Iterator[list[str]]:
        seen: list[str] = []
        with scoped(self.local, "seen", seen):
            yield seen


_WARNINGS = _Warnings()
logging.getLogger("apprise").addHandler(_WARNINGS)
requests_env.read_once()


@lru_cache(maxsize=1024)
def _parsed(url: str) -> dict[str, Any] | None:
    return cast("dict[str, Any] | None", apprise_plugins.url_to_dict(url, secure_logging=True))  # type: ignore[no-untyped-call]


def _service(url: str) -> NotifyBase | None:
    """A fresh Apprise service object for a URL (a shared one throttles between sends). Parsing the URL
    is most of what making one costs, so the parse is kept per URL; each service gets its own copy,
    since a plugin may change the arguments it is given."""
    parsed = _parsed(url)
    if parsed is None:
        return None
    return apprise.Apprise.instantiate(copy.deepcopy(parsed), suppress_exceptions=False)


def send(url: str, title: str, body: str, fmt: str, text: str | None = None) -> SendResult:
    """One send, in the calling thread, through a fresh Apprise service object (a shared one throttles
    between sends). Apprise's `Apprise.notify` would add tags, escalation and a hop to its own thread
    pool, none of which a single service needs: the service's own `notify` formats, splits and sends.

    `text` is the plain-text part of an html e-mail; without it Apprise derives one from the HTML.
    """
    url = native_url(url, fmt)
    try:
        obj = _service(url)
    except Exception as exc:
        return SendResult(False, False, "invalid channel URL: " + redact(str(exc), secret_parts(url)))
    if obj is None:
        return SendResult(False, False, f"invalid channel URL (scheme {scheme_of(url)!r})")
    if text is not None and fmt == "html" and isinstance(obj, NotifyEmail) and obj.pgp_mode == PGP_MODE_DEFAULT:
        return send_email(obj, title, body, text, secret_parts(url))
    with _WARNINGS.collect() as messages, retry_after.watch() as asked, keepalive.pooled():
        try:
            ok = bool(
                obj.notify(body=body or " ", title=title, body_format=_FORMATS.get(fmt, apprise.NotifyFormat.TEXT))
            )
        except Exception as exc:  # a plugin's own bug: a failure like a network one, never a crash
            ok = False
            messages.append(f"{type(exc).__name__}: {exc}")
    if ok:
        return SendResult(True)
    messages.extend(asked.api_errors)  # Apprise logs only the HTTP status of an API's refusal
    reason = redact("; ".join(dict.fromkeys(messages)) or "send failed", secret_parts(url))
    codes = [int(m) for m in _STATUS.findall(reason)]
    code = codes[-1] if codes else None
    wait = asked.wait if code in (429, 503) else None
    return SendResult(False, classify(code), reason[:1000], code, wait)


def with_text_part(raw: str, text: str) -> str:
    """An html e-mail Apprise prepared, its derived text/plain alternative replaced by `text`."""
    message = message_from_string(raw)
    parts = message.get_payload() if message.get_content_type() == "multipart/alternative" else None
    if not isinstance(parts, list) or not parts or not isinstance(parts[0], Message):
        return raw
    if parts[0].get_content_type() != "text/plain":
        return raw
    parts[0] = MIMEText(text, "plain", "utf-8")
    return message.as_string()


def send_email(obj: NotifyEmail, title: str, html_body: str, text: str, secrets: list[str]) -> SendResult:
    """An html e-mail whose text part is ours.

    Apprise always derives the text part from the HTML and has no way to take one, so this builds the
    message with Apprise's own `prepare_emails` (headers, names, Message-ID as Apprise does), swaps
    the text part, and sends it through Apprise's SMTP controller with the URL's settings.
    """
    failed: list[str] = []
    try:
        messages = NotifyEmail.prepare_emails(
            subject=title,
            body=html_body,
            notify_format=apprise.NotifyFormat.HTML,
            from_addr=obj.from_addr,
            to=obj.targets,
            cc=obj.cc,
            bcc=obj.bcc,
            reply_to=obj.reply_to,
            smtp_host=obj.smtp_host,
            headers={"X-Application": obj.app_id, **obj.headers},
            names=obj.names,
        )
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
                if not smtp.sendmail(str(obj.from_addr[1]), message.to_addrs, with_text_part(message.body, text)):
                    failed.append(message.recipient)
    except (*SMTP_EXCEPTIONS, AppriseEmailException, AppriseException) as exc:
        reason = redact(str(exc), secrets) or type(exc).__name__
        # SMTP 5xx (bad credentials, rejected sender) will not get better by retrying.
        permanent = isinstance(exc, smtplib.SMTPResponseException) and exc.smtp_code >= 500
        return SendResult(False, not permanent, f"e-mail to {obj.smtp_host} failed: {reason}"[:1000])
    if failed:
        return SendResult(False, True, f"the SMTP server did not accept the e-mail to {', '.join(failed)}")
    return SendResult(True)
