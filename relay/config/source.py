"""Where settings come from besides the file (relay.config.yaml_file reads that, relay.config.environment the
`RELAY_SECTION__KEY` variables): `${ENV}` substitution; and routes naming what is not defined. Works on plain
data; relay.config validates what this gives it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from relay.config.messages import key_path, unknown_name

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
EXAMPLE_CONFIG = Path("config.example.yaml")


class ConfigError(Exception):
    """The configuration cannot be used; the message names each key and its reason."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


def default_config_path() -> Path | None:
    """Without --config: ./config.yaml when it exists, else $RELAY_CONFIG (SPEC's order)."""
    here = Path("config.yaml")
    if here.exists():
        return here
    env = os.environ.get("RELAY_CONFIG")
    return Path(env) if env else None


def substitute(value: Any, environ: dict[str, str], problems: list[str], loc: tuple[str | int, ...] = ()) -> Any:
    """Replace `${NAME}` / `${NAME:-default}` in every string (NAME, else the file NAME_FILE names); each unset
    name is added to problems."""
    if isinstance(value, dict):
        return {k: substitute(v, environ, problems, (*loc, str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, environ, problems, (*loc, i)) for i, v in enumerate(value)]
    if isinstance(value, str):

        def repl(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in environ:
                return environ[name]
            if f"{name}_FILE" in environ:  # a secret mounted as a file (the chart's), as RELAY_<KEY>_FILE reads
                try:
                    return Path(environ[f"{name}_FILE"]).read_text(encoding="utf-8").rstrip("\r\n")
                except (OSError, UnicodeDecodeError):
                    problems.append(f"{key_path(loc)}: {name}_FILE names a file that cannot be read")
                    return ""
            if default is not None:
                return default
            problems.append(f"{key_path(loc)}: environment variable {name} is not set")
            return ""

        return _ENV_REF.sub(repl, value)
    return value


def reference_problems(data: dict[str, Any]) -> list[str]:
    """Every route (and the default) naming a channel, and every route naming a time interval, that is not
    defined: read from the raw data so that they are found even when other keys are invalid."""
    channels = data.get("channels", {})
    if not isinstance(channels, dict):
        return []  # the channels key itself is reported by validation
    entries = data.get("time_intervals")
    entries = entries if isinstance(entries, list) else []
    intervals = [str(t["name"]) for t in entries if isinstance(t, dict) and t.get("name") is not None]
    routes = data.get("routes")
    places = [(f"routes[{i}]", r) for i, r in enumerate(routes)] if isinstance(routes, list) else []
    checks = (
        ("channel", "channels", channels, [str(n) for n in channels], [*places, ("default", data.get("default"))]),
        ("time interval", "time_intervals", intervals, intervals, places),
    )
    problems: list[str] = []
    for what, section, known, listed, where_all in checks:
        fields = ("channels", "fallback") if section == "channels" else ("active_time_intervals", "mute_time_intervals")
        for where, route in where_all:
            for field in fields if isinstance(route, dict) else ():
                names = route.get(field)
                for j, name in enumerate(names if isinstance(names, list) else []):
                    if isinstance(name, str) and name not in known:
                        problems.append(f"{where}.{field}[{j}]: {unknown_name(what, name, listed, section)}")
    return problems
