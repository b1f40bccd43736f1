"""The `relay` command: run the service, check config, preview, test a channel, send, inspect and replay."""

from __future__ import annotations

import argparse
import os
import sys

from redis.exceptions import RedisError

from relay import __version__
from relay.cli import check, health, inspect, prefs, probe, run, send, silence, token
from relay.config import ConfigError
from relay.config.messages import did_you_mean
from relay.core.clock import Clock, system_clock
from relay.storage.schema import SchemaRefused

# Exit codes beyond 0 and a command's own "no" (1); one table in docs/http-api.md ("Exit codes"), kept by
# tests/cli/test_exit_codes.py. 2 is argparse's, for a misused command line; 3 is `relay serve` giving up.
USAGE, INVALID_CONFIG, REDIS_UNREACHABLE = 2, 4, 5


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="relay", description="Webhook notification relay.")
    p.add_argument("--version", action="version", version=f"relay {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_, description=help_)
        c.add_argument("--config", help="config file (default ./config.yaml, else $RELAY_CONFIG)")
        return c

    for module in (run, check, probe):
        module.add_commands(command)
    send.add_commands(command, sub)  # and `relay sink`, which reads no config
    for module in (inspect, token, prefs, silence, health):
        module.add_commands(command)
    p.set_defaults(command_names=sorted(sub.choices or ()))  # for the hint of a mistyped one (`main`)
    return p


def main(argv: list[str] | None = None, clock: Clock = system_clock) -> int:
    """`clock`: relay's one clock for every command (a test hands in the `ManualClock` of its runtime)."""
    command_line = parser()
    given = sys.argv[1:] if argv is None else argv
    first = next((a for a in given if not a.startswith("-")), None)
    commands: list[str] = command_line.get_default("command_names")
    if first is not None and first not in commands and not set(given[: given.index(first)]) & {"-h", "--help"}:
        near = did_you_mean(first, commands)
        hint = f"; did you mean `relay {near}`?" if near else f"; the commands are: {', '.join(sorted(commands))}"
        command_line.error(f"unknown command {first!r}{hint}")  # argparse's usage error: its line, exit 2
    args = command_line.parse_args(argv)
    args.clock = clock
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a reader gone away shows here, not as a traceback at exit
        return code
    except BrokenPipeError:  # `relay ... | head`: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ConfigError as exc:
        if len(exc.problems) > 1:
            print("relay: invalid config:", *(f"  {p}" for p in exc.problems), sep="\n", file=sys.stderr)
        else:
            print(f"relay: {exc}", file=sys.stderr)
        return INVALID_CONFIG
    except RedisError as exc:
        print(f"relay: cannot reach Redis ({exc}); is `relay serve` running with this config?", file=sys.stderr)
        return REDIS_UNREACHABLE
    except SchemaRefused as exc:  # a Redis this relay must not read or write: as unusable as an unreachable one
        print(f"relay: {exc}", file=sys.stderr)
        return REDIS_UNREACHABLE
    except (OSError, ValueError) as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        return 130
