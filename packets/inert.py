"""Worker text made inert for a terminal: every character that could drive one, or hide from a reader, is shown escaped; pure."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from packets.glyphs import BLANK_LOOKING, MAX_MARKS, is_default_ignorable, is_mark

# Categories a terminal may act on, or that hide or reorder what a reader sees:
#   Cc  C0 and C1 controls and DEL (ESC starts every CSI/OSC/DCS sequence; C1 0x9b/0x9d/0x90 are 8-bit CSI/OSC/DCS),
#   Cf  format characters: bidi embeddings/overrides/isolates and marks, zero-width space/joiners, soft hyphen,
#       BOM, word joiner, invisible operators, Unicode tag characters (U+E0000 block),
#   Zl, Zp  U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR (some terminals and viewers break lines there),
#   Cs  lone surrogates (undecodable bytes read with surrogateescape).
# and besides them every Default_Ignorable_Code_Point (variation selectors, Hangul fillers, the combining grapheme
# joiner), the blank-looking letters of `packets.glyphs.BLANK_LOOKING` (the Braille blank) and every combining mark past
# `MAX_MARKS` on one character (a flood that draws over the lines around it).
# Other letters, marks, symbols, private-use and unassigned characters are printable and left alone.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape_char(char: str) -> str:
    """One character as a visible escape (\\t, \\x1b, \\u200b, \\U000e0041)."""
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def is_hidden(char: str) -> bool:
    """Whether one character could act on a terminal or hide, reorder or fake what a reader sees."""
    return unicodedata.category(char) in _HIDDEN or char in BLANK_LOOKING or is_default_ignorable(char)


def _shown(text: str, keep: str) -> str:
    out, marks = [], 0
    for char in text:
        marks = marks + 1 if is_mark(char) else 0
        out.append(escape_char(char) if char not in keep and (is_hidden(char) or marks > MAX_MARKS) else char)
    return "".join(out)


def inert(text: str) -> str:
    """Text safe to write to a terminal: newlines and tabs kept, every other control or format character escaped visibly.

    ``"\\x1b[2Ktests passed"`` becomes the literal ``\\x1b[2Ktests passed``: the sequence is shown, never obeyed.
    """
    if text.isascii() and text.isprintable():
        return text
    return _shown(text, "\n\t")


def inert_line(text: str) -> str:
    """One line of inert text: like inert(), and newlines and tabs are escaped too, so it cannot start a line of its own."""
    if text.isascii() and text.isprintable():
        return text
    return _shown(text, "")


_TICKS = re.compile(r"`+")


def _longest_tick_run(text: str) -> int:
    return max((len(run) for run in _TICKS.findall(text)), default=0)


def markdown_code(text: str) -> str:
    """Text as one inert Markdown code span, on one line: whatever it holds (a heading mark, a link, an image, HTML,
    a table bar, backticks) is shown literally, never rendered. The span's backtick fence is longer than any backtick
    run inside, and a space pads either side (CommonMark strips exactly one), so the text cannot close it early."""
    shown = inert_line(text)
    tick = "`" * (_longest_tick_run(shown) + 1)
    return f"{tick} {shown} {tick}"


def markdown_fence(lines: Sequence[str], info: str = "text") -> list[str]:
    """Lines as one inert Markdown code block: each made an inert line, fenced with more backticks than any run in them."""
    shown = [inert_line(line) for line in lines]
    fence = "`" * max(3, 1 + max((_longest_tick_run(line) for line in shown), default=0))
    return [fence + info, *shown, fence]
