"""Apprise adapter: address a channel, send one delivery, classify the outcome, keep secrets out of errors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import apprise

from relay.recipients import valid_email

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
    """Pieces of a channel URL that may be credentials: user info, path segments, query values."""
    pieces: list[str] = []
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        pieces.extend(unquote(p) for p in userinfo.split(":"))
    pieces.extend(unquote(seg) for seg in parts.path.split("/"))
    if parts.scheme.lower() not in EMAIL_SCHEMES and parts.netloc and "@" not in parts.netloc:
        # Tokens often sit in the host position (slack://T/B/C, workflows://host/...): hide non-hosts.
        host = parts.netloc.split(":")[0]
        if "." not in host and host not in {"localhost"}:
            pieces.append(unquote(host))
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key.lower() not in {"from", "to", "mode", "format", "method", "cc", "bcc", "name"}:
            pieces.append(value)
    return sorted({p for p in pieces if len(p) >= 4}, key=len, reverse=True)


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


def classify(status_code: int | None) -> bool:
    """Whether a failure is worth retrying: no status (network), 408, 425, 429 and 5xx are."""
    if status_code is None:
        return True
    return status_code in _TRANSIENT_CODES or status_code >= 500


def send(url: str, title: str, body: str, fmt: str) -> SendResult:
    """One send through a fresh Apprise object (a shared one throttles between sends)."""
    secrets = secret_parts(url)
    try:
        obj = apprise.Apprise.instantiate(url, suppress_exceptions=False)
    except Exception as exc:
        return SendResult(False, False, "invalid channel URL: " + redact(str(exc), secrets))
    if obj is None:
        return SendResult(False, False, f"invalid channel URL (scheme {scheme_of(url)!r})")
    client = apprise.Apprise()
    client.add(obj)
    result = client.notify(body=body or " ", title=title, body_format=_FORMATS.get(fmt, apprise.NotifyFormat.TEXT))
    if result.status == apprise.AppriseResultStatus.SUCCESS:
        return SendResult(True)
    messages: list[str] = []
    for service in result:
        messages.extend(entry.message for entry in service.logs() if entry.level in ("WARNING", "ERROR"))
    if result.status == apprise.AppriseResultStatus.TIMEOUT:
        messages.append("timed out")
    text = redact("; ".join(dict.fromkeys(messages)) or f"send failed ({result.status.name})", secrets)
    codes = [int(m) for m in _STATUS.findall(text)]
    code = codes[-1] if codes else None
    return SendResult(False, classify(code), text[:1000], code)
