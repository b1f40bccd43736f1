"""Human durations ("10s", "5m", "2h", "7d", "1h30m") to seconds, and rates ("20/m") to sends per second."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(value: str | int | float) -> float:
    """Seconds in `value`; a bare number is seconds. Raises ValueError with the offending text."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        if value != value or value < 0:  # NaN (YAML .nan) or negative
            raise ValueError(f"negative duration: {value!r}")
        return float(value)
    text = str(value).strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"not a duration: {value!r} (use e.g. 30s, 5m, 2h, 7d)")
    return total


def parse_rate(value: str | float | int | None) -> float | None:
    """Sends per second from "1/s", "20/m", "100/h" (or a bare number per second)."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError("rate must be positive")
        return float(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*/\s*(s|m|h|sec|min|hour|second|minute)\s*", str(value))
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"rate {value!r} is not like 1/s, 20/m or 100/h")
    per = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}
    return float(match.group(1)) / per[match.group(2)]
