"""`relay token`: a strong random token for server.auth.tokens or server.admin_tokens."""

from __future__ import annotations

import argparse
import secrets

from relay.cli.common import Command

TOKEN_BYTES = 32  # 256 bits: beyond any guessing, throttled or not


def cmd_token(args: argparse.Namespace) -> int:
    print(secrets.token_urlsafe(TOKEN_BYTES))
    return 0


def add_commands(command: Command) -> None:
    help_ = f"print a random {TOKEN_BYTES}-byte token (URL-safe base64) for server.auth.tokens or admin_tokens"
    command("token", help_).set_defaults(func=cmd_token)
