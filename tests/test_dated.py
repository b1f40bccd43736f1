"""Every test module that writes a fixed date carries the `dated` marker, so that `.ci/run` runs it again with the
wall clock a year ahead and a year behind (`--wall-clock-shift`, tests/conftest.py): a test that passes only
before or after some date fails there, not on the day the calendar reaches it."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
# A year written as a date: datetime(2026, ...), "2026-11-27...", a Unix time of this century.
DATE = re.compile(r"datetime\(\s*(19|20)\d\d\s*,|[\"'](19|20)\d\d-\d\d-\d\d")
MARKED = re.compile(r"^pytestmark = .*pytest\.mark\.dated", re.MULTILINE)


def dated_modules() -> dict[Path, bool]:
    found = {}
    for path in sorted(HERE.rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        if path != Path(__file__).resolve() and DATE.search(text):
            found[path.relative_to(HERE.parent)] = MARKED.search(text) is not None
    return found


def test_every_module_with_a_fixed_date_is_marked_dated() -> None:
    found = dated_modules()
    assert len(found) >= 10  # the scan finds them (the quiet hours, digests, silences, preferences ...)
    unmarked = [str(p) for p, marked in found.items() if not marked]
    assert unmarked == [], "add `pytestmark = pytest.mark.dated` to these modules"
