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

# The escaping itself lives in :mod:`kvconform.rendering`, beneath the protocol, which
# also uses it for an adapter's own words (its name, a refusal of hello).
from kvconform.rendering import one_line as one_line
from kvconform.rendering import visible as visible


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
