"""relay.core.markdown: payload values made inert in chat markdown, with what people read unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay.core.markdown import escape_markdown, unescape_markdown

ESCAPED = [
    (
        "<!channel> Eve <https://evil.example|re-login here>",
        "\\<!channel\\> Eve \\<https://evil.example|re-login here\\>",
    ),
    ("<@U024BE7LH> <#C024BE7LR>", "\\<@U024BE7LH\\> \\<#C024BE7LR\\>"),
    ("[re-login](https://evil.example)", "\\[re-login\\]\\(https://evil.example\\)"),
    ("![x](https://evil.example/p.png)", "!\\[x\\]\\(https://evil.example/p.png\\)"),
    ("<at>Bob</at>", "\\<at\\>Bob\\</at\\>"),
    ("R&D *bold* _it_ `code` ~s~ #1 - x", "R&D *bold* _it_ `code` ~s~ #1 - x"),  # points nowhere: as it is
    ("C:\\dir\\x", "C:\\dir\\x"),  # a backslash before a letter is literal already
    ("a\\*b", "a\\\\*b"),  # before punctuation it would escape it: doubled
    ("\\<!here>", "\\\\\\<!here\\>"),  # so a value cannot undo the escape of the next character
    ("ends\\", "ends\\\\"),  # nor, last, escape the template's next character
    ("", ""),
]


@pytest.mark.parametrize(("value", "escaped"), ESCAPED)
def test_escape(value: str, escaped: str) -> None:
    assert escape_markdown(value) == escaped
    assert unescape_markdown(escaped) == value


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>[]()!\\*_`&:/|@#ab \n")), max_size=40))
def test_unescape_undoes_escape(value: str) -> None:
    assert unescape_markdown(escape_markdown(value)) == value


def _tokens(tokens: list[Any]) -> list[Any]:
    return [t for token in tokens for t in (token, *_tokens(token.children or []))]


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>[]()!\\*_`&:/|@#ab.h \n")), max_size=30))
def test_no_escaped_value_makes_a_link_an_image_or_html_in_commonmark(value: str) -> None:
    """What a CommonMark renderer (markdown-it, as Teams' card renderer) makes of a value in template text: no
    image, no HTML, and no link but the template's own."""
    markdown_it = pytest.importorskip("markdown_it")
    parser = markdown_it.MarkdownIt("commonmark")
    for source in (escape_markdown(value), f"x [{escape_markdown(value)}](https://ok.example) y"):
        tokens = _tokens(parser.parse(source))
        assert not {t.type for t in tokens} & {"image", "html_inline", "html_block"}, source
        assert {t.attrGet("href") for t in tokens if t.type == "link_open"} <= {"https://ok.example"}, source
