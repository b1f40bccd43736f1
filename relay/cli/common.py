"""What every command shares: reading the config, logging, tables, payload files, the Redis it reads."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relay.config import Config, ConfigError, load_config
from relay.config.source import EXAMPLE_CONFIG, default_config_path
from relay.core.redaction import Redactor
from relay.runtime.logs import escape, setup_logging

# Adds a subcommand that takes --config: (name, help) -> its parser.
Command = Callable[[str, str], argparse.ArgumentParser]


def command_group(command: Command, name: str, help_: str) -> Command:
    """The maker of a command's subcommands, each taking `--config` after its own name too."""
    sub = command(name, help_).add_subparsers(dest=f"{name}_command", required=True)

    def leaf(leaf_name: str, leaf_help: str) -> argparse.ArgumentParser:
        c = sub.add_parser(leaf_name, help=leaf_help, description=leaf_help)
        c.add_argument("--config", default=argparse.SUPPRESS, help="config file (as for every command)")
        return c

    return leaf


def config(args: argparse.Namespace) -> Config:
    return load_config(args.config)


def runtime(args: argparse.Namespace) -> Any:
    """Everything built once (relay.runtime.bootstrap), for a command that works on relay's records."""
    from relay.runtime.bootstrap import build

    return build(config(args), clock=args.clock)


def config_file(args: argparse.Namespace) -> Path | None:
    return Path(args.config) if args.config else default_config_path()


def no_config_file_warning() -> str:
    """What to say when no config file is found: relay would accept notifications and send them nowhere."""
    example = (
        f"./{EXAMPLE_CONFIG} is here: try `relay check --config {EXAMPLE_CONFIG}`, or copy it to ./config.yaml"
        if EXAMPLE_CONFIG.is_file()
        else f"start from {EXAMPLE_CONFIG} in relay's source tree, copied to ./config.yaml"
    )
    return (
        "no config file (no --config, no ./config.yaml, no $RELAY_CONFIG): relay runs on its defaults and "
        f"the environment, with no channels and no routes, so nothing would be sent; {example}"
    )


def log(config: Config) -> Redactor:
    """Its lines scrubbed with the redactor returned, which the command hands on to what it builds."""
    redactor = Redactor.of(config)
    setup_logging(config.logging.level, config.logging.format, redactor)
    return redactor


def refuse_open_bind(config: Config) -> None:
    problem = config.server.exposure_problem()
    if problem is not None:
        raise ConfigError(problem)


def read_payload(path: str) -> tuple[str, Any]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    return text, json.loads(text)


def output_options(c: argparse.ArgumentParser) -> None:
    c.add_argument("--format", choices=["table", "json"], default="table", help="json: every field, whole")
    c.add_argument("--json", action="store_const", const="json", dest="format", help="the same as --format json")
    c.add_argument("--wide", action="store_true", help="cells whole, never cut with an ellipsis")


CELL_WIDTH = 60  # a longer cell is cut, with an ellipsis (`wide`: never)


def table(rows: list[dict[str, Any]], columns: list[str], wide: bool = False) -> str:
    if not rows:
        return "(none)"
    # One line a row: a multi-line error reads as one.
    # Escaped as the logs escape them: a payload's or a silence's terminal escape sequence is shown, not run.
    cells = [[("" if r.get(c) is None else escape(" ".join(str(r.get(c)).split()))) for c in columns] for r in rows]
    widest = max(len(v) for row in cells for v in row) if wide else CELL_WIDTH
    widths = [min(widest, max(len(c), *(len(row[i]) for row in cells))) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(_cut(v, w).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _cut(value: str, width: int) -> str:
    return value if len(value) <= width else value[: width - 1] + "…"
