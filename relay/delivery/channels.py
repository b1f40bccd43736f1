"""Apprise adapter: address a channel, send one delivery, classify the outcome, keep secrets out of errors."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import apprise

from relay.core.markdown import escape_markdown
from relay.core.outcome import Delivered, Outcome, Permanent
from relay.core.recipients import valid_email
from relay.core.redaction import EMAIL_SCHEMES, url_secrets
from relay.delivery import apprise_compat
from relay.tracing import OFF_TRACER, Tracer

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
# Services that render a message's title as markdown (a Teams card's title is a markdown TextBlock); Slack's
# header is plain text, which Apprise escapes itself.
MARKDOWN_TITLES = frozenset({"workflows", "workflow"})
_FORMATS = {"txt": apprise.NotifyFormat.TEXT, "md": apprise.NotifyFormat.MARKDOWN, "html": apprise.NotifyFormat.HTML}


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
    """The address passes the strict grammar first: a payload can never add targets, hosts or parameters."""
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


def redact(text: str, secrets: Iterable[str]) -> str:
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
    return redact(shown, url_secrets(url))


def check_url(url: str) -> str | None:
    """None when Apprise accepts the URL, else the reason (with no secret in it)."""
    try:
        obj = apprise.Apprise.instantiate(url, suppress_exceptions=False)
    except Exception as exc:
        return redact(str(exc), url_secrets(url)) or type(exc).__name__
    if obj is None:
        return f"unsupported or malformed URL (scheme {scheme_of(url)!r})"
    return None


def native_url(url: str, fmt: str) -> str:
    """Block Kit for Slack markdown; an operator's own `blocks=` or `template=` on the URL wins."""
    if fmt != "md" or scheme_of(url) != "slack":
        return url
    # Not urlsplit: a Slack channel `/#alerts` is part of Apprise's path, where urlsplit sees a fragment
    # (the query would land before it and Apprise would post to its default channel).
    base, _, query = url.partition("?")
    keys = {k.lower() for k, _ in parse_qsl(query, keep_blank_values=True)}
    if keys & {"blocks", "template"}:
        return url
    return base + "?" + "&".join(q for q in (query, "blocks=yes") if q)


def card_title(url: str, title: str) -> str:
    """Titles are plain text (SPEC): where the service reads markdown into them, markdown is escaped."""
    return escape_markdown(title) if scheme_of(url) in MARKDOWN_TITLES else title


def send(
    url: str, title: str, body: str, fmt: str, text: str | None = None, tracer: Tracer = OFF_TRACER, **thread: Any
) -> Outcome:
    """One send in this thread through the service's own `notify` (`Apprise.notify` adds tags and a thread pool a
    single service needs not). `text`: an html e-mail's plain-text part (else Apprise derives one). `thread`
    (relay.threads.sending.aim): `mail`, an e-mail's headers given its sender; `broadcast`, a Slack reply's."""
    scheme = scheme_of(url)
    with tracer.span("relay.send", **{"relay.channel.scheme": scheme}) as span:
        outcome, status = _send(native_url(url, fmt), card_title(url, title), body, fmt, text, **thread)
        span.set("relay.outcome", type(outcome).__name__.lower())  # delivered, transient, permanent
        # The service's answer: an SMTP server's reply code (a message accepted is a 250), or the HTTP status.
        if scheme in EMAIL_SCHEMES:
            span.set("relay.smtp.code", 250 if isinstance(outcome, Delivered) else status)
        else:
            span.set("http.response.status_code", status)
        return outcome


def _send(
    url: str, title: str, body: str, fmt: str, text: str | None, mail: Any = None, broadcast: bool = False
) -> tuple[Outcome, int | None]:
    """`send`, and the service's last answer code when there was one."""
    secrets = url_secrets(url)
    try:
        obj = apprise_compat.service(url)
    except Exception as exc:
        return Permanent("invalid channel URL: " + redact(str(exc), secrets)), None
    if obj is None:
        return Permanent(f"invalid channel URL (scheme {scheme_of(url)!r})"), None
    own = (text is not None and fmt == "html") or (mail is not None and fmt in ("html", "txt"))
    if own and apprise_compat.takes_own_text_part(obj):
        headers = mail(str(obj.from_addr[1])) if mail is not None else None
        scrub = lambda t: redact(t, secrets)  # noqa: E731
        sent = apprise_compat.send_email(obj, title, body, text, scrub, fmt=_FORMATS[fmt], headers=headers)
        return sent, None if isinstance(sent, Delivered) else sent.status
    with apprise_compat.watch(broadcast) as seen:
        try:
            ok = bool(
                obj.notify(body=body or " ", title=title, body_format=_FORMATS.get(fmt, apprise.NotifyFormat.TEXT))
            )
        except Exception as exc:  # a plugin's own bug: a failure like a network one, never a crash
            ok = False
            seen.warnings.append(f"{type(exc).__name__}: {exc}")
    reason = redact("; ".join(dict.fromkeys(seen.warnings)), secrets)
    sent = apprise_compat.outcome(ok, seen, reason, lambda t: redact(t, secrets))
    return sent, sent.status if not isinstance(sent, Delivered) else seen.statuses[-1] if seen.statuses else None
