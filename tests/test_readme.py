"""The README's first screen, as a newcomer reads it: the two commands, CI running the test one, and
try-outs that each post their own eventId (a repeated one is answered `duplicate`, and the README says why)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
RUN = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/relay serve --config config.example.yaml"
TEST = " && ".join(
    [
        "python3 -m venv .venv",
        ".venv/bin/pip install -q -e '.[test]'",
        ".venv/bin/python -m pytest -q -p no:cacheprovider -n 4",
    ]
)


def test_the_two_commands_are_there_and_ci_runs_the_test_one() -> None:
    assert RUN in README and TEST in README
    assert TEST in (ROOT / ".ci" / "run").read_text()


def test_each_try_out_posts_its_own_event_id_and_duplicate_is_explained() -> None:
    sample = ROOT / "tests" / "data" / "access-control-request-failed.json"
    original = re.search(r'"eventId":\s*"([^"]+)"', sample.read_text())
    assert original is not None
    ids = re.findall(rf"sed 's/{re.escape(original.group(1))}/([^/]+)/'", README)
    assert len(ids) >= 3 and len(set(ids)) == len(ids), ids
    assert '"status": "duplicate"` means' in README


def test_every_page_the_readme_links_exists() -> None:
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).is_file(), link
