"""Text that came from outside, made safe for each place it is shown (spec/security.md).

Anything an adapter says -- its name, version and language, a failure message, a
refusal's text, the stderr it writes -- and anything read back from a saved
report is data, never markup or terminal control. Each function here takes any
Python string (lone surrogates included) and returns text that renders as
itself in one medium, without raising:

- :func:`visible` -- for a terminal or a plain-text file: C0 and C1 control
  characters (ESC, NUL, CR, ...), lone surrogates, bidirectional controls and the
  Unicode line separators written as escapes (``\\x1b``, ``\\ud800``, ``\\u202e``);
  newline and tab kept.
- :func:`xml` -- legal XML 1.0 character data (what JUnit consumers parse).
- :func:`markdown` -- inert inline Markdown: one line, every character that could
  open a heading, link, image, emphasis, code span, HTML tag or comment, or break
  a table cell written as a character reference.

HTML is escaped with :func:`html.escape` after :func:`visible`.
"""

from __future__ import annotations

import re
from functools import cache

#: Tab and newline, the two control characters :func:`visible` keeps.
_KEPT = {ord("\t"): None, ord("\n"): None}


@cache
def _unshowable() -> re.Pattern[str]:
    """What :func:`visible` escapes (compiled when first needed: most text has none of it)."""
    return re.compile(
        r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
        # directional marks, embeddings, overrides and isolates, which can make the
        # harness's own words that follow read reversed (CVE-2021-42574), and the
        # Unicode line and paragraph separators, which break a line in some viewers
        r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
    )


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character and lone surrogate written as an escape."""
    if text.isascii() and text.translate(_KEPT).isprintable():
        return text  # ASCII without a control character but tab and newline: as it is
    return _unshowable().sub(_escape, text)


def one_line(text: str) -> str:
    """:func:`visible`, with line breaks and tabs as escapes too: for a single console line."""
    return visible(text).replace("\n", "\\n").replace("\t", "\\t")


def xml(text: str) -> str:
    """Character data legal in XML 1.0 (ElementTree escapes ``<``, ``&`` and quotes)."""
    return visible(text)


# Markdown: the text is flattened to one line and always placed after other text, so
# no block syntax can start in it; every character with an inline meaning in
# CommonMark or GitHub's Markdown -- escapes, code spans, emphasis, strikethrough,
# links and images, raw HTML and comments, entities, table cells, math, and the
# extended autolinks (``www.``, ``http:``, ``a@b``) -- becomes a character reference.
@cache
def _markdown_special() -> re.Pattern[str]:
    return re.compile(r"[\\`*_\[\]()<>#!|~&.:@$]")


def markdown(text: str) -> str:
    """Inert inline Markdown for ``text``: one line, no syntax can come from it."""
    flat = visible(text).replace("\r", " ").replace("\n", " ").replace("\t", " ")
    return _markdown_special().sub(lambda m: f"&#{ord(m.group())};", flat)
