"""Logging: JSON lines (one event a line) or readable text on a terminal; secrets scrubbed from both. Values come
from payloads (an eventId, a kind), so none may start a line of its own: JSON escapes control characters; the text
format escapes them (and quotes a value with spaces or brackets) and indents a traceback's lines."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

from relay.core.redaction import Redactor
from relay.tracing import OFF_TRACER, Tracer

_FIELDS = ("eventId", "deliveryId", "channel", "state", "kind", "template")
# C0 and C1 controls, DEL, and the Unicode line and paragraph separators: each breaks a line somewhere.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NEEDS_QUOTES = re.compile(r'[\s"=\[\]]')


def _escaped(char: re.Match[str]) -> str:
    c = char.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or f"\\u{ord(c):04x}"


def escape(text: str) -> str:
    """`text` on one line: each control character written as its escape (`\\n`, `\\u001b`)."""
    return _CONTROL.sub(_escaped, text)


def text_value(value: object) -> str:
    """Quoted when it holds a space, a control, a quote, `=` or a bracket: no value reads as another field."""
    text = str(value)
    if text and not _NEEDS_QUOTES.search(text) and not _CONTROL.search(text):
        return text
    return '"' + escape(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


# Line breaks to some readers that JSON leaves unescaped (ensure_ascii=False): written as JSON escapes.
_JSON_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class Formatter(logging.Formatter):
    """It scrubs with the process's redactor and adds its tracer's ids (`setup_logging`, `follow`)."""

    def __init__(self, redactor: Redactor | None = None, tracer: Tracer = OFF_TRACER) -> None:
        super().__init__()
        self.redactor = redactor if redactor is not None else Redactor()
        self.tracer = tracer


class JsonFormatter(Formatter):
    def format(self, record: logging.LogRecord) -> str:
        _scrub = self.redactor.scrub
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": _scrub(record.getMessage()),
        }
        for name in _FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                out[name] = _scrub(str(value))
        ids = self.tracer.log_ids()  # the notification's trace, when tracing is on and the line is of one
        if ids is not None:
            out["traceId"], out["spanId"] = ids
        if record.exc_info:
            out["exc"] = _scrub(self.formatException(record.exc_info))
        if record.stack_info:
            out["stack"] = _scrub(self.formatStack(record.stack_info))
        return json.dumps(out, ensure_ascii=False).translate(_JSON_BREAKS)


class TextFormatter(Formatter):
    def format(self, record: logging.LogRecord) -> str:
        _scrub = self.redactor.scrub
        # Scrubbed before escaping: a secret is remembered as written, not as its escape.
        extras = " ".join(
            f"{n}={text_value(_scrub(str(getattr(record, n))))}"
            for n in _FIELDS
            if getattr(record, n, None) is not None
        )
        ids = self.tracer.log_ids()
        if ids is not None:
            extras = f"{extras} traceId={ids[0]}".strip()
        message = escape(_scrub(record.getMessage()))
        line = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.name}: {message}"
        if extras:
            line += f"  [{extras}]"
        if record.exc_info:
            line += _indented(_scrub(self.formatException(record.exc_info)))
        if record.stack_info:
            line += _indented(_scrub(self.formatStack(record.stack_info)))
        return line


def _indented(block: str) -> str:
    """A traceback under its line: each of its lines indented, and escaped within itself."""
    return "".join("\n    " + escape(part) for part in block.splitlines())


def setup_logging(level: str = "INFO", fmt: str = "auto", redactor: Redactor | None = None) -> None:
    """The root logger's one handler, on stderr, scrubbing with `redactor`."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter((JsonFormatter if use_json else TextFormatter)(redactor))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Apprise logs each send failure itself; relay records it on the delivery instead. Its level must
    # stay at WARNING: Apprise reads the failure (and the HTTP status relay classifies) from these records.
    apprise_log = logging.getLogger("apprise")
    apprise_log.setLevel(logging.WARNING)
    apprise_log.propagate = False
    for noisy in ("rq.worker", "rq.scheduler", "rq.queue"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    # HTTP clients log every request URL at DEBUG, and a webhook URL carries its tokens in the path.
    for client in ("urllib3", "requests", "httpx", "httpcore"):
        logging.getLogger(client).setLevel(logging.WARNING)


def follow(redactor: Redactor, tracer: Tracer) -> None:
    """From now on: a process hands over what it built once it has built it, after logging was set up."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, Formatter):
            handler.formatter.redactor, handler.formatter.tracer = redactor, tracer
