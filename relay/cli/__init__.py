"""The `relay` command: one module per group of commands, wired together in relay.cli.main."""

from relay.cli.main import main as main
from relay.cli.main import parser as parser
