"""A template that breaks a limit while it runs (too long, too large) is stopped within the deadline and with
little memory, and its delivery gets the platform's text (docs/templates.md, "Limits")."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from relay.core import rendering
from relay.core.rendering import PLATFORM, Renderer
from tests.core.test_rendering import KNAME, TEXT, TITLE, delivery, notification, write

DEADLINE = 0.3  # seconds: the render deadline in these tests (2 s in production)
MAX_PEAK = 32 * 2**20  # bytes a stopped render may have allocated at its peak

# Each built 100-565 million characters, or ran for 25 s, before the limits held.
ATTACKS = {
    "set-around-nested-loops": (
        "{% set x %}{% for i in range(20000) %}{% for j in range(20000) %}{% endfor %}{% endfor %}{% endset %}",
        "took longer than",
    ),
    "center-filter": ("{{ 'x'|center(300000000) }}", "too large"),
    "macro-doubling": (
        "{% macro d(s, n) %}{% if n %}{{ d(s ~ s, n - 1) }}{% else %}{{ s|length }}{% endif %}{% endmacro %}"
        "{{ d('x', 28) }}",
        "more than 200,000 characters",
    ),
    "nested-format-spec": ("{{ '{0:{1}}'.format('x', '>100000000') }}", "too large"),
    "indent": ("{{ 'a\\nb'|indent(10**8) }}", "too large"),
}


@pytest.fixture
def tdir(tmp_path: Path) -> Path:
    return tmp_path / "templates"


@pytest.fixture
def deadline(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(rendering, "RENDER_SECONDS", DEADLINE)
    return DEADLINE


@pytest.mark.parametrize("fmt", ["md", "html"])
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_template_breaking_a_limit_falls_back_in_time_and_memory(
    tdir: Path, deadline: float, name: str, fmt: str
) -> None:
    source, reason = ATTACKS[name]
    write(tdir, f"{KNAME}/default.{fmt}.j2", "{% block title %}TEMPLATE TITLE{% endblock %}" + source)
    renderer = Renderer(tdir)
    tracemalloc.start()
    started = time.monotonic()
    try:
        out = renderer.render(notification(), delivery(), fmt)
        elapsed = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.template == PLATFORM
    assert out.title == TITLE
    assert TEXT in out.body
    assert len(out.body) < 10_000
    assert out.error is not None and reason in out.error, out.error
    assert elapsed < deadline + 2.0  # stopped, not run its 25 s: room for a loaded machine (tracemalloc on)
    assert peak < MAX_PEAK


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        # Nothing output, each step cheap: the deadline stops them (no output chunk would have).
        ("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "took longer"),
        ("{% set s = 'ab' * 50000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}", "took longer"),
        ("{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(60) }}", "took longer"),
        # Each value small, together far too many: the render's budget stops them.
        ("{% set x %}{% for i in range(100000) %}{{ 'y'.center(100000) }}{% endfor %}{% endset %}", "built more"),
        ("{% set b = 'x' * 100000 %}{% set x %}{% for i in range(100000) %}{{ b }}{% endfor %}{% endset %}", "built"),
        ("{% for i in range(100000) %}{% set s = 'ab' * 50000 %}{% endfor %}", "built more"),
    ],
)
def test_loops_and_accumulations_are_stopped(tdir: Path, deadline: float, source: str, reason: str) -> None:
    write(tdir, f"{KNAME}/default.txt.j2", source + "done")
    started = time.monotonic()
    out = Renderer(tdir).render(notification(), delivery(), "txt")
    assert time.monotonic() - started < deadline + 0.5
    assert out.template == PLATFORM
    assert out.error is not None and reason in out.error, out.error


def test_the_budget_is_per_render(tdir: Path) -> None:
    """What one render built is not held against the next: a template that builds 3 million characters (under
    the 5 million a render may build) renders every time."""
    write(tdir, f"{KNAME}/default.txt.j2", "{% for i in range(20) %}{% set x = 'yy' * 75000 %}{% endfor %}ok")
    renderer = Renderer(tdir)
    for _ in range(3):
        out = renderer.render(notification(), delivery(), "txt")
        assert (out.error, out.body) == (None, "ok")
