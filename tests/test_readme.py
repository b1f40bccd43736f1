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
        ".venv/bin/pip install -q -r requirements-test.txt",
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


README_MAX_BYTES = 16_000  # the first screen and the way to the docs; the reference lives in docs/


def test_the_readme_stays_short_and_points_at_the_docs() -> None:
    assert len(README.encode()) <= README_MAX_BYTES
    for page in ("configuration", "deploy", "operations", "security", "development"):
        assert f"](docs/{page}.md" in README, page


def _anchors(text: str) -> set[str]:
    """GitHub's ids of a page's headings: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", text, flags=re.DOTALL), re.MULTILINE)
    }


def test_every_link_between_readme_and_docs_reaches_its_page_and_heading() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]*\.md)?(?:#([^)\s]+))?\)", page.read_text()):
            if not target and not anchor:
                continue
            linked = (page.parent / target).resolve() if target else page
            if not linked.is_file():
                broken.append(f"{page.name}: {target}")
            elif anchor and anchor not in _anchors(linked.read_text()):
                broken.append(f"{page.name}: {target}#{anchor}")
    assert broken == []
