"""Traces of each notification across relay's processes (OpenTelemetry), off by default: then each call does
nothing (`relay.tracing.tracer`); `start` imports the adapter (`relay.tracing.otel`) when tracing is wanted. A
`traceparent` stored with the event and each delivery lets any worker, later, continue the same trace."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from relay.config import Config
from relay.core.redaction import Redactor
from relay.tracing.tracer import OFF_TRACER, Tracer, Value

__all__ = ["OFF_TRACER", "Tracer", "Value", "start", "wanted"]
log = logging.getLogger("relay.tracing")


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
    return backend
