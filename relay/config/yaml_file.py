"""Reading the config file's YAML: a key written twice is a problem (YAML keeps the last silently), and a
syntax error names the file, line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from relay.config.messages import key_path
from relay.config.source import ConfigError

_MERGE = "tag:yaml.org,2002:merge"  # `<<: *base` then a key of base: an override, not a repeat

# What an error of the YAML parser most often means in a hand-written config.
_HINTS = {
    "found character '\\t' that cannot start any token": "indent with spaces: YAML does not allow tabs",
    "mapping values are not allowed here": "quote a value that has ': ' in it, or check this line's indentation",
    "expected <block end>, but found": "check this line's indentation against the lines above",
    "found undefined alias": "an *alias needs an &anchor of that name above it",
}


def read_file(file: Path, problems: list[str]) -> dict[str, Any]:
    """The file's top-level mapping, each key written twice a problem; else ConfigError."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}
        problems.extend(duplicate_keys(node, file))
        loaded = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(syntax_error(exc, file)) from None
    finally:
        loader.dispose()
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{file}: the top level must be a mapping of keys (like `server:` and `channels:`)")
    return loaded


def syntax_error(exc: yaml.YAMLError, file: Path) -> str:
    """`FILE: not valid YAML at line 3, column 1: <the parser's reason> (<its context>); <a hint>`."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return f"{file}: not valid YAML: {exc}"
    mark = exc.problem_mark
    message = f"{file}: not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    if exc.context and exc.context_mark is not None:
        message += f" ({exc.context} at line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1})"
    hint = next((h for start, h in _HINTS.items() if (exc.problem or "").startswith(start)), None)
    return f"{message}; {hint}" if hint else message


def duplicate_keys(root: Node, file: Path) -> list[str]:
    """Each key that one mapping holds more than once, at any depth, with its key path and lines."""
    found: list[tuple[int, str]] = []
    seen: set[int] = set()  # an &anchor's node is reached again through each *alias: report it once

    def walk(node: Node, loc: tuple[str | int, ...]) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*loc, i))
        elif isinstance(node, MappingNode):
            places: dict[tuple[str, str], list[tuple[Node, Node]]] = {}
            for key, value in node.value:
                if not isinstance(key, ScalarNode) or key.tag == _MERGE:
                    continue
                places.setdefault((key.tag, key.value), []).append((key, value))
                walk(value, (*loc, key.value))
            for (_, name), pairs in places.items():
                if len(pairs) > 1:
                    found.append((pairs[0][0].start_mark.line, _repeated(key_path((*loc, name)), name, pairs, file)))

    walk(root, ())
    return [message for _, message in sorted(found)]


def _repeated(where: str, name: str, pairs: list[tuple[Node, Node]], file: Path) -> str:
    marks = [key.start_mark for key, _ in pairs]
    if len({m.line for m in marks}) == len(marks):
        at = [f"{m.line + 1}" for m in marks]
        places = "lines " + ", ".join(at[:-1]) + f" and {at[-1]}"
    else:  # `{url: a, url: b}` on one line
        at = [f"line {m.line + 1} column {m.column + 1}" for m in marks]
        places = ", ".join(at[:-1]) + f" and {at[-1]}"
    times = "twice" if len(pairs) == 2 else f"{len(pairs)} times"
    collections = all(isinstance(value, MappingNode | SequenceNode) for _, value in pairs)
    other = "the other" if len(pairs) == 2 else "the others"
    fix = f"merge them into one `{name}:`" if collections else f"keep one `{name}:` and remove {other}"
    return (
        f"{where}: written {times} in {file} ({places}); YAML would keep only the last and silently drop {other}: {fix}"
    )
