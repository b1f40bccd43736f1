"""Traces of each notification across relay's processes (OpenTelemetry), off by default.

This module is the whole of what the rest of relay calls, and it imports nothing of OpenTelemetry: with
tracing off (the default) every call is a check of one global and a shared do-nothing span, and
OpenTelemetry is never imported. `start` turns it on for a process (README, "Tracing"): the OpenTelemetry
adapter (`relay.tracing.otel`, the optional `otel` extra) is imported then.

A notification's trace context travels as a W3C `traceparent` string: stored with the event at intake, with
each delivery at planning (`Delivery.trace`), so any worker, at any later time, continues the same trace.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from relay.config import Config

if TYPE_CHECKING:
    from starlette.middleware import Middleware

    from relay.core.model import Delivery
    from relay.tracing.otel import Backend

log = logging.getLogger("relay.tracing")
Value = str | int | float | bool


class Span(Protocol):
    def set(self, key: str, value: Value | None) -> None: ...


class _Off:
    """The span of every call while tracing is off: enters, sets and leaves, doing nothing."""

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, key: str, value: Value | None) -> None:
        return None


OFF = _Off()
_backend: Backend | None = None


def wanted(enabled: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Tracing is on with an OTLP endpoint in the environment or `tracing.enabled`; OTEL_SDK_DISABLED wins."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return bool(endpoint) or enabled


def start(config: Config, role: str, instance: str, exporter: Any = None) -> bool:
    """Turn tracing on for this process when it is wanted; whether it is on. `role`: api or worker;
    `instance`: this process's name (its `service.instance.id`). `exporter`: a span exporter of the test's
    (then spans are exported as they end), else OTLP as OpenTelemetry's variables say."""
    global _backend
    if _backend is not None or not (exporter is not None or wanted(config.tracing.enabled)):
        return _backend is not None
    try:
        from relay.tracing.otel import Backend
    except ImportError as exc:  # the extra is not installed: relay runs on, without traces
        log.warning("tracing is on but OpenTelemetry is missing (%s): pip install 'relay[otel]'", exc.name)
        return False
    _backend = Backend.start(role, instance, exporter)
    log.info("tracing on: %s", _backend.describe())
    return True


def stop() -> None:
    """Export what is pending and turn tracing off (tests; a process's exit flushes by itself)."""
    global _backend
    if _backend is not None:
        _backend.stop()
        _backend = None


def on() -> bool:
    return _backend is not None


def span(
    name: str, parent: str | None = None, links: Iterable[str | None] = (), **attributes: Value | None
) -> AbstractContextManager[Span]:
    """A span around a step, the current span's child, or `parent`'s (a stored traceparent; "" for a new
    trace); `links`: stored traceparents of related traces. Secrets are scrubbed before export."""
    if _backend is None:
        return OFF
    return _backend.span(name, parent, links, attributes)


def attempt(record: Delivery) -> AbstractContextManager[Span]:
    """The span of one try of a delivery: in its notification's trace (`record.trace`), linked to its first
    try's span when this is a retry or a replay. Stamps `record` with the traces that later tries follow."""
    if _backend is None:
        return OFF
    return _backend.attempt(record)


def stamp(records: Iterable[Delivery]) -> None:
    """Planned deliveries take the current span's context: their tries are spans of this trace."""
    if _backend is not None:
        here = _backend.carrier()
        for record in records:
            record.trace = record.trace or here or None


def carrier() -> str:
    """The current span's context as a W3C traceparent ("" when off, or outside any span)."""
    return _backend.carrier() if _backend is not None else ""


def log_ids() -> tuple[str, str] | None:
    """The current trace and span ids, for a log line (None when off, or outside any span)."""
    return _backend.log_ids() if _backend is not None else None


def middleware() -> list[Middleware]:
    """The HTTP app's tracing middleware (an incoming traceparent continues its trace): none when off."""
    return _backend.middleware() if _backend is not None else []
