"""Titles cut to what each kind of channel takes, in linear time (relay.core.titles)."""

from __future__ import annotations

import time

import pytest

from relay.core.titles import EMAIL_CHARS, SLACK_CHARS, SUBJECT_OCTETS, TEAMS_CHARS, fit_title


@pytest.mark.parametrize("scheme", ["mailto", "mailtos", "slack", "workflows", "msteams", "json", "discord"])
def test_a_title_that_fits_is_unchanged(scheme: str) -> None:
    title = "Access request failed: Invoices SQL output port & more <b>"
    assert fit_title(title, scheme) == title


def test_a_long_email_subject_is_cut_at_a_word_with_an_ellipsis() -> None:
    fitted = fit_title("word " * 4000, "mailto")
    assert len(fitted) <= EMAIL_CHARS
    assert fitted.endswith("word...")
    assert fitted.isascii()


def test_a_spaceless_email_subject_is_cut_at_its_limit() -> None:
    assert fit_title("x" * 1000, "mailtos") == "x" * (EMAIL_CHARS - 3) + "..."


@pytest.mark.parametrize("ch", ["ö", "漢", "😀"])
def test_a_non_ascii_email_subject_fits_one_line_as_encoded(ch: str) -> None:
    fitted = fit_title(ch * 1000, "mailto")
    assert fitted.endswith("...")
    assert 3 * len(fitted.encode()) + 12 <= SUBJECT_OCTETS  # its encoded words, at their largest
    assert len(fitted) > 50


def test_a_slack_header_counts_characters_as_slack_receives_them() -> None:
    fitted = fit_title("R&D <team> " * 100, "slack")
    escaped = fitted.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert len(escaped) <= SLACK_CHARS
    assert fitted.endswith("…")
    assert fit_title("x" * 150, "slack") == "x" * 150
    assert fit_title("x" * 151, "slack") == "x" * 149 + "…"


def test_a_teams_heading_is_cut_to_its_limit() -> None:
    assert fit_title("y" * 1000, "workflows") == "y" * (TEAMS_CHARS - 1) + "…"


def test_other_channels_keep_the_title_for_apprise_to_fit() -> None:
    assert fit_title("z" * 5000, "json") == "z" * 5000


def test_cutting_takes_linear_time() -> None:
    started = time.monotonic()
    for scheme in ("mailto", "slack", "workflows"):
        assert len(fit_title("word " * 200_000, scheme)) <= EMAIL_CHARS
        assert len(fit_title("é" * 1_000_000, scheme)) <= EMAIL_CHARS
    assert time.monotonic() - started < 0.5
