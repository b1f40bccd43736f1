"""A service's answer, or its silence, in words an operator can act on: where (host and port, never the
rest of a URL), what happened (refused, timed out, ...) and what the service said, bounded to one line."""

from __future__ import annotations

import json
import re
import socket
import ssl
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import requests

_MAX_WORDS = 300
_CODE = re.compile(r"[A-Za-z0-9_.:,-]{1,100}")
_CHANNEL, _TS = re.compile(r"[A-Za-z0-9_-]{1,32}"), re.compile(r"[0-9]{1,20}\.[0-9]{1,10}")
_MAX_ERROR_BODY = 65_536


def words_of(raw: bytes | str) -> str:
    """A service's answer as one short line (its first `_MAX_WORDS` characters)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    line = " ".join(text[: _MAX_WORDS * 4].split())
    return line if len(line) <= _MAX_WORDS else line[: _MAX_WORDS - 1] + "…"


def where(url: str) -> str:
    """host:port of a URL, and nothing else of it (its user part, path and query may hold secrets)."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme.lower())
    except ValueError:
        return "the service"
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """An exception and the ones under it (its cause, context, and urllib3's `reason`), each once."""
    todo: list[BaseException] = [exc]
    met: set[int] = set()
    while todo:
        current = todo.pop(0)
        if id(current) in met or len(met) > 20:
            continue
        met.add(id(current))
        yield current
        for under in (current.__cause__, current.__context__, getattr(current, "reason", None)):
            if isinstance(under, BaseException):
                todo.append(under)


def network_failure(exc: BaseException) -> str:
    """What a request that got no answer ran into, as words that follow "connection to host:port"."""
    causes = list(_causes(exc))
    for kinds, words in (
        ((ConnectionRefusedError,), "refused"),
        ((socket.gaierror,), "failed: host name not found"),
        ((TimeoutError, socket.timeout, requests.Timeout), "timed out"),
        ((ssl.SSLError,), "failed: TLS handshake failed"),
        ((ConnectionResetError,), "reset by the peer"),
        ((ConnectionAbortedError, BrokenPipeError), "closed by the peer"),
    ):
        if any(isinstance(c, kinds) for c in causes):
            return words
    return f"failed ({type(causes[-1]).__name__})"


def _answer(url: str, body: bytes) -> tuple[str, dict[str, Any]] | None:
    """Slack's Web API method and its JSON answer, when it is one."""
    if len(body) > _MAX_ERROR_BODY or b'"ok"' not in body:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return (urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1], data) if isinstance(data, dict) else None


def api_error(url: str, body: bytes) -> tuple[str, str] | None:
    """Slack's Web API `{"ok": false, "error": ...}`: the error code, and a text that says what was needed."""
    method, data = _answer(url, body) or ("", {})
    if data.get("ok") is not False:
        return None
    code, needed = data.get("error"), data.get("needed")
    if not isinstance(code, str) or not _CODE.fullmatch(code):
        return None  # only short code-like strings: an answer's free text could hold anything
    text = f"{method} answered {code}" if _CODE.fullmatch(method) else f"the service answered {code}"
    if isinstance(needed, str) and _CODE.fullmatch(needed):
        text += f" (needed: {needed})"
    return code, text


def posted(url: str, body: bytes) -> str | None:
    """`<channel id>:<ts>` of the message chat.postMessage posted (the one a reply's `thread_ts` names)."""
    method, data = _answer(url, body) or ("", {})
    channel, ts = data.get("channel"), data.get("ts")
    if method != "chat.postMessage" or not isinstance(channel, str) or not isinstance(ts, str):
        return None
    return f"{channel}:{ts}" if _CHANNEL.fullmatch(channel) and _TS.fullmatch(ts) else None
