"""The Lua scripts, read from the source (issue 36): a third shorter than the 416 non-blank lines they had
grown to, and each with its keys and arguments said in one place, the comment just above it."""

from __future__ import annotations

import re
from pathlib import Path

RELAY = Path(__file__).resolve().parent.parent / "relay"
# A script: a module-level string (or a string added to another, `_HOLD + """..."""`) that calls Redis.
SCRIPT = re.compile(r'^(\w+)\s*=\s*(?:\(\s*\w+\s*\+\s*)?f?"""(.*?)"""', re.S | re.M)
# Two thirds of 416, plus the 58 lines of conversations' own three scripts (relay/threads/store.py, issue #49).
CEILING = 277 + 58


def scripts() -> dict[str, tuple[int, str, str]]:
    """Each script (`module.NAME`): its non-blank lines, the comment block just above it, and its text."""
    found = {}
    for path in sorted(RELAY.rglob("*.py")):
        source = path.read_text()
        for match in SCRIPT.finditer(source):
            if "redis.call" not in match.group(2):
                continue
            above = source[: match.start()].splitlines()
            header = []
            while above and above[-1].startswith("#"):
                header.insert(0, above.pop())
            lines = sum(1 for line in match.group(2).splitlines() if line.strip())
            found[f"{path.relative_to(RELAY.parent)}:{match.group(1)}"] = (lines, "\n".join(header), match.group(2))
    return found


def test_the_lua_scripts_are_a_third_shorter_than_they_had_grown() -> None:
    found = scripts()
    total = sum(lines for lines, _, _ in found.values())
    assert len(found) >= 10, found  # the pattern still finds them
    assert total <= CEILING, "\n".join(f"{lines:4d} {name}" for name, (lines, _, _) in sorted(found.items()))


def test_each_script_says_its_keys_and_arguments_just_above_it() -> None:
    for name, (_, header, text) in scripts().items():
        if "KEYS[" in text or "ARGV[" in text:  # not a helper taking what it needs as a function's arguments
            assert "KEYS" in header, f"{name}: no KEYS in the comment just above it"
