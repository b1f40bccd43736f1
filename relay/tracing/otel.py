"""The OpenTelemetry adapter (imported only when tracing is on): the SDK configured by its own variables, the
instrumentations of ASGI, redis and requests, and relay's spans. Two rules on top: a client call with no span
above it (RQ polling, a heartbeat) is dropped, so a trace is a notification's or a request's; and every text of
a span is scrubbed of secrets on its way out, outgoing URLs losing their path and query (a webhook's token).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, format_span_id, format_trace_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes
from starlette.middleware import Middleware

from relay.core.model import Delivery
from relay.core.redaction import Redactor, hide_path_keys
from relay.tracing.tracer import Tracer, Value

log = logging.getLogger("relay.tracing")
SCOPE = "relay"
DEFAULT_SERVICE = "relay"
# Probes and scrapes are no notification's: not traced unless the operator's own variable says otherwise.
UNTRACED_URLS = "healthz,readyz,metrics"
_W3C = TraceContextTextMapPropagator()
# The delivery a try is of: every span of that try (render, send, record) names its channel and delivery.
_IN_HAND: ContextVar[Mapping[str, Any]] = ContextVar("relay_delivery_in_hand", default=MappingProxyType({}))


class NotificationsOnly(Sampler):
    """The configured sampler (OTEL_TRACES_SAMPLER), except that a client span with no parent is dropped."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        if kind is SpanKind.CLIENT and not trace.get_current_span(parent_context).get_span_context().is_valid:
            return SamplingResult(Decision.DROP)
        return self.inner.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"NotificationsOnly{{{self.inner.get_description()}}}"


def _text(value: str, redactor: Redactor) -> str:
    """A span's text with the configured secrets, signed links' tokens and people in paths masked."""
    return redactor.scrub(hide_path_keys(value))


def _clean(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return _text(value, redactor)
    if isinstance(value, tuple | list):
        return tuple(_text(v, redactor) if isinstance(v, str) else v for v in value)
    return value


def _attributes(attributes: Mapping[str, Any] | None, redactor: Redactor) -> dict[str, Any]:
    return {k: _clean(v, redactor) for k, v in (attributes or {}).items()}


def scrubbed(span: ReadableSpan, redactor: Redactor) -> ReadableSpan:
    """A copy of the span with every text scrubbed of the configured secrets."""
    status = span.status
    if status.description:
        status = Status(status.status_code, _text(status.description, redactor))
    return ReadableSpan(
        name=_text(span.name, redactor),
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=_attributes(span.attributes, redactor),
        events=[Event(_text(e.name, redactor), _attributes(e.attributes, redactor), e.timestamp) for e in span.events],
        links=[Link(link.context, _attributes(link.attributes, redactor)) for link in span.links],
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class Scrubbing(SpanExporter):
    """Hands the exporter scrubbed copies of the spans: one place that every span passes."""

    def __init__(self, inner: SpanExporter, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([scrubbed(s, self.redactor) for s in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _hide_url(span: Any, request: Any) -> None:
    """requests' span: the URL without its path and query (a Slack or Teams webhook's token is its path)."""
    if span is None or not span.is_recording():
        return
    parts = urlsplit(str(getattr(request, "url", "")))
    shown = f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}/…"
    for key in ("url.full", "http.url"):
        span.set_attribute(key, shown)


def exporter_from_env() -> SpanExporter | None:
    """The exporter OpenTelemetry's variables name: OTLP over HTTP (protobuf) unless they say otherwise."""
    kind = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")[0].strip().lower()
    if kind == "none":
        return None
    if kind == "console":
        return ConsoleSpanExporter()
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol == "grpc":
        try:
            import opentelemetry.exporter.otlp.proto.grpc.trace_exporter as grpc
        except ImportError:
            log.warning("OTLP over gRPC needs opentelemetry-exporter-otlp-proto-grpc installed; using http/protobuf")
        else:
            exporter: SpanExporter = grpc.OTLPSpanExporter()
            return exporter
    elif protocol not in (None, "", "http/protobuf"):
        log.warning("OTLP protocol %r is not supported here; using http/protobuf", protocol)
    return OTLPSpanExporter()  # endpoint, headers, timeout, compression: OTEL_EXPORTER_OTLP_* variables


def resource(role: str, instance: str) -> Resource:
    """OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME as the SDK reads them; `relay` when they name no service."""
    found = Resource.create({SERVICE_INSTANCE_ID: instance, "relay.role": role})
    if str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        found = found.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))
    return found


class _Handle:
    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def set(self, key: str, value: Any) -> None:
        if value is not None:
            self.span.set_attribute(key, value)


def _parent(traceparent: str | None) -> Context | None:
    """The context a span starts in: the current one (None), or a stored traceparent's ("": a new trace)."""
    if traceparent is None:
        return None
    return _W3C.extract({"traceparent": traceparent}) if traceparent else Context()


def _links(traceparents: Iterable[str | None]) -> list[Link]:
    found = []
    for value in dict.fromkeys(t for t in traceparents if t):
        context = trace.get_current_span(_W3C.extract({"traceparent": value})).get_span_context()
        if context.is_valid:
            found.append(Link(context))
    return found


class Backend(Tracer):
    on = True

    def __init__(self, provider: TracerProvider, exporter: SpanExporter | None) -> None:
        self.provider = provider
        self.exporter = exporter
        self.tracer = provider.get_tracer(SCOPE)

    @classmethod
    def start(cls, role: str, instance: str, redactor: Redactor, exporter: SpanExporter | None = None) -> Backend:
        provider = TracerProvider(resource=resource(role, instance))
        # Set before any tracer is made: tracers take the provider's sampler when made.
        provider.sampler = NotificationsOnly(provider.sampler)
        chosen = exporter if exporter is not None else exporter_from_env()
        if chosen is not None:
            # A test's exporter gets each span as it ends; the OTLP one in batches (OTEL_BSP_* variables).
            processor = SimpleSpanProcessor if exporter is not None else BatchSpanProcessor
            provider.add_span_processor(processor(Scrubbing(chosen, redactor)))
        RedisInstrumentor().instrument(tracer_provider=provider)
        RequestsInstrumentor().instrument(tracer_provider=provider, request_hook=_hide_url)
        return cls(provider, chosen)

    def describe(self) -> str:
        attributes = self.provider.resource.attributes
        exporter = type(self.exporter).__name__ if self.exporter is not None else "no exporter"
        return f"service {attributes.get(SERVICE_NAME)}, instance {attributes.get(SERVICE_INSTANCE_ID)}, {exporter}"

    def stop(self) -> None:
        RedisInstrumentor().uninstrument()
        RequestsInstrumentor().uninstrument()
        self.provider.shutdown()

    @contextmanager
    def span(
        self, name: str, parent: str | None = None, links: Iterable[str | None] = (), **attributes: Value | None
    ) -> Iterator[_Handle]:
        with self.tracer.start_as_current_span(
            name,
            context=_parent(parent),
            links=_links(links),
            attributes={k: v for k, v in {**_IN_HAND.get(), **attributes}.items() if v is not None},
            # An exception's text may hold a URL: the span says its type only (the log has the rest).
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield _Handle(span)
            except BaseException as exc:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise

    @contextmanager
    def attempt(self, record: Delivery) -> Iterator[_Handle]:
        attributes: dict[str, Value | None] = {
            "relay.event_id": record.eventId,
            "relay.kind": record.kind,
            "relay.attempt": record.attempts + 1,
            "relay.digest.items": len(record.items) or None,
        }
        token = _IN_HAND.set({"relay.channel": record.channel, "relay.delivery_id": record.id})
        try:
            with self.span("relay.deliver", record.trace or "", [record.firstTry], **attributes) as span:
                here = self.carrier()
                # A delivery planned before tracing was on, or a digest (its items' traces are its links):
                # this try starts its trace, which its later tries continue.
                record.trace = record.trace or here
                record.firstTry = record.firstTry or here
                try:
                    yield span
                finally:
                    span.set("relay.state", str(record.state))
        finally:
            _IN_HAND.reset(token)

    def carrier(self) -> str:
        found: dict[str, str] = {}
        _W3C.inject(found)
        return found.get("traceparent", "")

    def log_ids(self) -> tuple[str, str] | None:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return format_trace_id(context.trace_id), format_span_id(context.span_id)

    def middleware(self) -> list[Middleware]:
        excluded = os.environ.get("OTEL_PYTHON_ASGI_EXCLUDED_URLS", os.environ.get("OTEL_PYTHON_EXCLUDED_URLS"))
        return [
            Middleware(
                OpenTelemetryMiddleware,
                excluded_urls=UNTRACED_URLS if excluded is None else excluded,
                tracer_provider=self.provider,
                exclude_spans=["receive", "send"],  # one span per request, not one per ASGI message
            )
        ]
