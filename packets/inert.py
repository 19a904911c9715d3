"""Worker text made inert for a terminal: every character that could drive one is shown escaped; pure, imports nothing of ours."""

from __future__ import annotations

import unicodedata

# Categories a terminal may act on, or that hide or reorder what a reader sees:
#   Cc  C0 and C1 controls and DEL (ESC starts every CSI/OSC/DCS sequence; C1 0x9b/0x9d/0x90 are 8-bit CSI/OSC/DCS),
#   Cf  format characters: bidi embeddings/overrides/isolates and marks, zero-width space/joiners, soft hyphen,
#       BOM, word joiner, invisible operators, Unicode tag characters (U+E0000 block),
#   Zl, Zp  U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR (some terminals and viewers break lines there),
#   Cs  lone surrogates (undecodable bytes read with surrogateescape).
# Letters, marks, symbols, private-use and unassigned characters are printable and left alone.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(char: str) -> str:
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
    return unicodedata.category(char) in _HIDDEN


def inert(text: str) -> str:
    """Text safe to write to a terminal: newlines and tabs kept, every other control or format character escaped visibly.

    ``"\\x1b[2Ktests passed"`` becomes the literal ``\\x1b[2Ktests passed``: the sequence is shown, never obeyed.
    """
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(char) if char not in "\n\t" and is_hidden(char) else char for char in text)


def inert_line(text: str) -> str:
    """One line of inert text: like inert(), and newlines and tabs are escaped too, so it cannot start a line of its own."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(char) if is_hidden(char) else char for char in text)
