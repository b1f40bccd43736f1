"""Logging: JSON lines (one event a line) or readable text on a terminal; secrets scrubbed from both."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from relay import tracing
from relay.core.redaction import remember
from relay.core.redaction import scrub as _scrub

_FIELDS = ("eventId", "deliveryId", "channel", "state", "kind", "template")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
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
        ids = tracing.log_ids()  # the notification's trace, when tracing is on and the line is of one
        if ids is not None:
            out["traceId"], out["spanId"] = ids
        if record.exc_info:
            out["exc"] = _scrub(self.formatException(record.exc_info))
        if record.stack_info:
            out["stack"] = _scrub(self.formatStack(record.stack_info))
        return json.dumps(out, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(f"{n}={getattr(record, n)}" for n in _FIELDS if getattr(record, n, None) is not None)
        ids = tracing.log_ids()
        if ids is not None:
            extras = f"{extras} traceId={ids[0]}".strip()
        line = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if extras:
            line += f"  [{extras}]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return _scrub(line)


def setup_logging(level: str = "INFO", fmt: str = "auto", secrets: list[str] | None = None) -> None:
    # Every form of every secret: a channel URL's password may be logged percent-decoded, say.
    remember(secrets or [])
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if use_json else TextFormatter())
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
