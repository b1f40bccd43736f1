"""Traces of each notification across relay's processes (OpenTelemetry), off by default: then each call is one
check and a shared do-nothing span; `start` imports the adapter (`relay.tracing.otel`) when tracing is wanted. A
`traceparent` stored with the event and each delivery lets any worker, later, continue the same trace."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from relay.config import Config
from relay.core.redaction import Redactor

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


class Tracer:
    """One process's tracing, made by its builder: off (`OFF_TRACER`) or on, over OpenTelemetry (`start`)."""

    def __init__(self, backend: Backend | None = None) -> None:
        self._backend = backend

    @property
    def on(self) -> bool:
        return self._backend is not None

    def stop(self) -> None:
        """Export what is pending (tests; a process's exit flushes by itself); this tracer is off after."""
        if self._backend is not None:
            self._backend.stop()
            self._backend = None

    def span(
        self, name: str, parent: str | None = None, links: Iterable[str | None] = (), **attributes: Value | None
    ) -> AbstractContextManager[Span]:
        """`parent`: a stored traceparent ("" for a new trace); `links`: of related traces."""
        if self._backend is None:
            return OFF
        return self._backend.span(name, parent, links, attributes)

    def attempt(self, record: Delivery) -> AbstractContextManager[Span]:
        """Linked to its first try's; stamps `record` with the traces later tries follow."""
        if self._backend is None:
            return OFF
        return self._backend.attempt(record)

    def stamp(self, records: Iterable[Delivery]) -> None:
        """Planned deliveries take the current span's context: their tries are spans of this trace."""
        if self._backend is not None:
            here = self._backend.carrier()
            for record in records:
                record.trace = record.trace or here or None

    def carrier(self) -> str:
        """The current span's context as a W3C traceparent ("" when off, or outside any span)."""
        return self._backend.carrier() if self._backend is not None else ""

    def log_ids(self) -> tuple[str, str] | None:
        """The current trace and span ids, for a log line (None when off, or outside any span)."""
        return self._backend.log_ids() if self._backend is not None else None

    def middleware(self) -> list[Middleware]:
        """The HTTP app's tracing middleware (an incoming traceparent continues its trace): none when off."""
        return self._backend.middleware() if self._backend is not None else []


# Off holds nothing and never changes: one is shared by every process that does not trace.
OFF_TRACER = Tracer()


def wanted(enabled: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Tracing is on with an OTLP endpoint in the environment or `tracing.enabled`; OTEL_SDK_DISABLED wins."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return bool(endpoint) or enabled


def start(config: Config, role: str, instance: str, exporter: Any = None, redactor: Redactor | None = None) -> Tracer:
    """`OFF_TRACER` unless tracing is wanted; `exporter`: a test's, else OTLP."""
    if not (exporter is not None or wanted(config.tracing.enabled)):
        return OFF_TRACER
    try:
        from relay.tracing.otel import Backend
    except ImportError as exc:  # the extra is not installed: relay runs on, without traces
        log.warning(
            "tracing is on but OpenTelemetry is missing (%s): pip install -e '.[otel]' (the otel extra)", exc.name
        )
        return OFF_TRACER
    backend = Backend.start(role, instance, redactor if redactor is not None else Redactor(), exporter)
    log.info("tracing on: %s", backend.describe())
    return Tracer(backend)
