"""The tracer relay calls (`rt.tracer`): this one, off, where each call does nothing (a shared do-nothing span);
`relay.tracing.otel.Backend`, on, overrides every call."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from starlette.middleware import Middleware

    from relay.core.model import Delivery

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
    """One process's tracing, made by its builder: this one is off (`OFF_TRACER`), every span a shared do-nothing;
    `start` makes one on, over OpenTelemetry (`relay.tracing.otel.Backend`, which overrides each call)."""

    on = False

    def stop(self) -> None:
        """Export what is pending (tests; a process's exit flushes by itself)."""

    def span(
        self, name: str, parent: str | None = None, links: Iterable[str | None] = (), **attributes: Value | None
    ) -> AbstractContextManager[Span]:
        """`parent`: a stored traceparent ("" for a new trace); `links`: of related traces."""
        return OFF

    def attempt(self, record: Delivery) -> AbstractContextManager[Span]:
        """Linked to its first try's; stamps `record` with the traces later tries follow."""
        return OFF

    def stamp(self, records: Iterable[Delivery]) -> None:
        """Planned deliveries take the current span's context: their tries are spans of this trace."""
        here = self.carrier()
        for record in records:
            record.trace = record.trace or here or None

    def carrier(self) -> str:
        """The current span's context as a W3C traceparent ("" when off, or outside any span)."""
        return ""

    def log_ids(self) -> tuple[str, str] | None:
        """The current trace and span ids, for a log line (None when off, or outside any span)."""
        return None

    def middleware(self) -> list[Middleware]:
        """The HTTP app's tracing middleware (an incoming traceparent continues its trace): none when off."""
        return []


# Off holds nothing and never changes: one is shared by every process that does not trace.
OFF_TRACER = Tracer()
