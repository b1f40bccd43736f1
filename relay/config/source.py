"""Where settings come from besides the file (relay.config.yaml_file reads that): `${ENV}` substitution and
`RELAY_SECTION__KEY` overrides; and routes naming what is not defined. Works on plain data; relay.config
validates what this gives it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from relay.config.messages import key_path, unknown_name

ENV_PREFIX = "RELAY_"
# Environment names that are not config keys.
_NOT_KEYS = {"RELAY_CONFIG"}
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
    """Replace `${NAME}` / `${NAME:-default}` in every string; each unset name is added to problems."""
    if isinstance(value, dict):
        return {k: substitute(v, environ, problems, (*loc, str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, environ, problems, (*loc, i)) for i, v in enumerate(value)]
    if isinstance(value, str):

        def repl(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            problems.append(f"{key_path(loc)}: environment variable {name} is not set")
            return ""

        return _ENV_REF.sub(repl, value)
    return value


def _schema_path(model: type[BaseModel], rest: str) -> list[str] | None:
    """The key path whose names, joined by '_', spell `rest` (server_max_body_bytes -> server.max_body_bytes)."""
    found: list[list[str]] = []
    for field_name, info in model.model_fields.items():
        key = info.alias or field_name
        if rest == key:
            found.append([key])
        elif (
            rest.startswith(key + "_") and isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
        ):
            tail = _schema_path(info.annotation, rest[len(key) + 1 :])
            if tail:
                found.append([key, *tail])
    return found[0] if len(found) == 1 else None


def _env_path(model: type[BaseModel], name: str) -> list[str] | None:
    rest = name[len(ENV_PREFIX) :]
    if "__" in rest:
        parts = [p.lower() for p in rest.split("__") if p]
    else:
        parts = _schema_path(model, rest.lower()) or []
    # Only names of config sections count: RELAY_WEBHOOK_TOKEN may be a secret for ${...}.
    if not parts or parts[0] not in model.model_fields or parts[0] == "base_dir":
        return None
    return parts


def apply_env(data: dict[str, Any], environ: dict[str, str], model: type[BaseModel]) -> None:
    """RELAY_SERVER__PORT=9000 (or RELAY_SERVER_PORT, matched against the known keys) sets server.port;
    values are read as YAML (lists, numbers, booleans)."""
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name in _NOT_KEYS:
            continue
        parts = _env_path(model, name)
        if parts is None:
            continue
        try:
            value = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            value = raw
        node = data
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value


def reference_problems(data: dict[str, Any]) -> list[str]:
    """Every route (and the default) naming a channel that `channels` does not define, and every route naming
    an unknown time interval, read from the raw data so that they are found even when other keys are invalid."""
    channels = data.get("channels", {})
    if not isinstance(channels, dict):
        return []  # the channels key itself is reported by validation
    routes = data.get("routes")
    places: list[tuple[str, Any]] = (
        [(f"routes[{i}]", r) for i, r in enumerate(routes)] if isinstance(routes, list) else []
    )
    places.append(("default", data.get("default")))
    problems: list[str] = []
    defined = [str(name) for name in channels]
    for where, route in places:
        if not isinstance(route, dict):
            continue
        for field in ("channels", "fallback"):
            names = route.get(field)
            if not isinstance(names, list):
                continue
            for j, name in enumerate(names):
                if isinstance(name, str) and name not in channels:
                    problems.append(f"{where}.{field}[{j}]: {unknown_name('channel', name, defined, 'channels')}")
    return problems + _interval_problems(data)


def _interval_problems(data: dict[str, Any]) -> list[str]:
    """Every route naming a time interval that `time_intervals` does not define."""
    defined = data.get("time_intervals")
    entries = defined if isinstance(defined, list) else []
    known = [str(t["name"]) for t in entries if isinstance(t, dict) and t.get("name") is not None]
    routes = data.get("routes")
    problems: list[str] = []
    for i, route in enumerate(routes if isinstance(routes, list) else []):
        if not isinstance(route, dict):
            continue
        for field in ("active_time_intervals", "mute_time_intervals"):
            names = route.get(field)
            for j, name in enumerate(names if isinstance(names, list) else []):
                if isinstance(name, str) and name not in known:
                    unknown = unknown_name("time interval", name, known, "time_intervals")
                    problems.append(f"routes[{i}].{field}[{j}]: {unknown}")
    return problems
