"""Settings from the environment, read by pydantic-settings: `RELAY_SECTION__KEY=value`, or `RELAY_<KEY>_FILE`
(docs/configuration.md). A value stays the exact string given, converted only by the config's validation; lists
and mappings are JSON. Every problem is returned, never the value of a variable."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from relay.config.messages import is_union, key_path, member_type, unwrap

ENV_PREFIX = "RELAY_"
FILE_SUFFIX = "_FILE"
NESTED = "__"
# Config keys that are not settings: where the file was read from.
_NOT_SETTINGS = frozenset({"base_dir"})
_JSON_HINT = 'write a list as JSON (["a", "b"]) and a mapping as JSON ({"key": "value"})'


class _Settings(BaseSettings):
    # The source only gathers values, it never validates: a key the models lack reaches the config's own
    # validation, which names it (`server.bogus: unknown key`).
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter=NESTED, case_sensitive=False, extra="ignore"
    )


class _NotJson:
    """A list or mapping value that JSON could not read: reported with its variable's name, then dropped."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Source(EnvSettingsSource):
    """A value that is not JSON where JSON is needed is kept as a problem, rather than stopping at the first."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        # Names are matched in any case after the prefix (case_sensitive=False lowers them).
        self.env_vars = {name.lower(): value for name, value in environ.items()}

    def decode_complex_value(self, field_name: str, field: FieldInfo | None, value: Any) -> Any:
        try:
            return super().decode_complex_value(field_name, field, value)  # type: ignore[arg-type]
        except ValueError as exc:
            # A union (`digest: 15m` or a mapping) or a mapping's value keeps its string: validation reads it.
            if field is None or is_union(field.annotation):
                raise
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not JSON"
            return _NotJson(reason)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


@functools.cache
def _settings_class(model: type[BaseModel]) -> type[BaseSettings]:
    """The model's fields as settings: which names are keys and take JSON (the model validates the values)."""
    fields: dict[str, Any] = {
        name: (info.annotation, info) for name, info in model.model_fields.items() if name not in _NOT_SETTINGS
    }
    return create_model(f"{model.__name__}FromEnvironment", __base__=_Settings, **fields)


def _key_path(model: type[BaseModel], rest: str) -> list[str] | None:
    """The key path whose names, joined by '_', spell `rest` (server_max_body_bytes -> server.max_body_bytes)."""
    found: list[list[str]] = []
    for field_name, info in model.model_fields.items():
        key = info.alias or field_name
        if rest == key:
            found.append([key])
        elif rest.startswith(key + "_") and _is_model(info.annotation):
            tail = _key_path(info.annotation, rest[len(key) + 1 :])  # type: ignore[arg-type]
            if tail:
                found.append([key, *tail])
    return found[0] if len(found) == 1 else None


def _parts(model: type[BaseModel], name: str) -> list[str] | None:
    """`__` between levels, or a single `_` where it names exactly one key; None: no section of the config."""
    rest = name[len(ENV_PREFIX) :].lower()
    parts = [p for p in rest.split(NESTED) if p] if NESTED in rest else _key_path(model, rest) or []
    # Only names of config sections count: RELAY_WEBHOOK_TOKEN may be a secret for ${...}.
    if not parts or parts[0] not in model.model_fields or parts[0] in _NOT_SETTINGS:
        return None
    return parts


def _is_key(model: type[BaseModel], parts: list[str]) -> bool:
    """Whether the path names a key of the model (through sections and the entries of a mapping)."""
    annotation: Any = model
    for part in parts:  # through `X | None` and Annotated alike
        annotation = member_type(unwrap(annotation), part)
        if annotation is None:
            return False
    return True


def _read_secret(name: str, file: str, problems: list[str]) -> str | None:
    """The file's text without its trailing newline; else a problem naming the variable and the file."""
    try:
        return Path(file).read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        problems.append(f"{name}: cannot read the file {file!r} it names: {exc.strerror or exc}")
    except UnicodeDecodeError:
        problems.append(f"{name}: the file {file!r} it names is not UTF-8 text")
    return None


def _variables(
    model: type[BaseModel], environ: Mapping[str, str], problems: list[str], read: dict[str, str]
) -> dict[str, tuple[str, str]]:
    """By key path: the name and the value (a `_FILE` one's file's, kept in `read` too); a key set twice: a problem."""
    found: dict[str, str | None] = {}
    given: dict[str, str] = {}  # key -> the name that set it, for messages
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        parts = _parts(model, name)
        stem = name[: -len(FILE_SUFFIX)] if name.upper().endswith(FILE_SUFFIX) else ""
        stem_parts = _parts(model, stem) if stem else None
        wanted: str | None = value
        if (parts is None or not _is_key(model, parts)) and stem_parts and _is_key(model, stem_parts):
            parts, wanted = stem_parts, _read_secret(name, value, problems)
            if wanted:
                read[f"{name}={value}"] = wanted
        if parts is None:
            continue  # not a config key: free for ${...}
        # An unknown key under a section goes on: validation names it (`server.bogus: unknown key`).
        key = NESTED.join(parts)
        if key in given:
            problems.append(f"{given[key]} and {name}: both set {key_path(tuple(parts))}; keep one")
            continue
        given[key], found[key] = name, wanted
    return {key: (given[key], value) for key, value in found.items() if value is not None}


def environment_settings(
    model: type[BaseModel], environ: Mapping[str, str], problems: list[str], read: dict[str, str]
) -> dict[str, Any]:
    """Nested data for the model to validate, and the problems; `read` gets what `_FILE` variables' files hold."""
    found = _variables(model, environ, problems, read)
    data = _Source(_settings_class(model), {ENV_PREFIX + key: value for key, (_, value) in found.items()})()
    names = {tuple(key.split(NESTED)): name for key, (name, _) in found.items()}
    _drop_not_json(data, (), names, problems)
    return data


def _drop_not_json(
    node: dict[str, Any], loc: tuple[str, ...], names: dict[tuple[str, ...], str], problems: list[str]
) -> None:
    for key in list(node):
        value, here = node[key], (*loc, key)
        if isinstance(value, dict):
            _drop_not_json(value, here, names, problems)
        elif isinstance(value, _NotJson):
            name = names.get(tuple(k.lower() for k in here), ENV_PREFIX + NESTED.join(here).upper())
            problems.append(f"{key_path(here)}: {name} is not JSON ({value.reason}); {_JSON_HINT}")
            del node[key]


def merge(data: dict[str, Any], overrides: dict[str, Any]) -> None:
    """The overrides laid over the file's data: mappings merged key by key, any other value replaced."""
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            merge(data[key], value)
        else:
            data[key] = value


def hidden(problem: str, read: Mapping[str, str]) -> str:
    """A `_FILE` variable's file (a secret's) written as `<the file of NAME=PATH>`, whole and line by line."""
    for where, text in read.items():
        for spelling in sorted(
            {text, repr(text)[1:-1], *(line for line in text.splitlines() if len(line) > 2)}, key=len
        )[::-1]:
            problem = problem.replace(spelling, f"<the file of {where}>")
    return problem


def named_by_variable(problem: str, model: type[BaseModel], environ: Mapping[str, str]) -> str:
    """An unknown key that a RELAY_ variable set, said in the variable's words: `server.prot: unknown key, set by
    RELAY_SERVER__PROT; did you mean RELAY_SERVER__PORT?` (the key path alone names nothing the operator wrote)."""
    where, _, rest = problem.partition(": ")
    near = re.fullmatch(r"unknown key; did you mean `(.+)`\?", rest)
    if near is None:
        return problem
    for name in environ:
        parts = _parts(model, name.removesuffix(FILE_SUFFIX)) if name.upper().startswith(ENV_PREFIX) else None
        if parts and ".".join(parts) == where:
            meant = ENV_PREFIX + NESTED.join([*parts[:-1], near[1]]).upper()
            return f"{where}: unknown key, set by {name}; did you mean {meant}?"
    return problem
