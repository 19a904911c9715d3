"""What a person sees of worker text: default-ignorable and blank-looking characters, combining floods, and a confusable skeleton; pure.

The message rules (`packets.screen`) and the terminal escaping (`packets.inert`) both read these tables, so what a body
may hold and what is shown escaped are decided in one place.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache

from registry.kinds import CONTROLLER_KINDS, WORKER_KINDS

# --- Default_Ignorable_Code_Point --------------------------------------------------------------------------------
# Python's unicodedata has no property tables, so the set is derived here exactly as Unicode defines it
# (UAX #44, DerivedCoreProperties.txt):
#   Default_Ignorable_Code_Point = Other_Default_Ignorable_Code_Point + Cf + Variation_Selector
#                                  - White_Space - FFF9..FFFB - 13430..1343F - Prepended_Concatenation_Mark
# with the two PropList.txt sets it names written out below (they are short and change rarely; unicodedata
# supplies Cf for the Python in use). None of the Cf characters is White_Space since Unicode 6.3, so that
# subtraction removes nothing here.
_Ranges = tuple[tuple[int, int], ...]
OTHER_DEFAULT_IGNORABLE: _Ranges = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x2065, 0x2065), (0x3164, 0x3164), (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8), (0xE0000, 0xE0000), (0xE0002, 0xE001F), (0xE0080, 0xE00FF), (0xE01F0, 0xE0FFF),
)  # fmt: skip
VARIATION_SELECTOR: _Ranges = ((0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF))
PREPENDED_CONCATENATION_MARK: _Ranges = (
    (0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
)  # fmt: skip
_NOT_IGNORABLE: _Ranges = ((0xFFF9, 0xFFFB), (0x13430, 0x1343F))


def _within(code: int, ranges: Iterable[tuple[int, int]]) -> bool:
    return any(low <= code <= high for low, high in ranges)


@cache  # a body has few distinct characters; a 64 KiB one is judged in milliseconds
def is_default_ignorable(char: str) -> bool:
    """Unicode's Default_Ignorable_Code_Point: a character a renderer shows as nothing when it does not support it."""
    code = ord(char)
    if code < 0xAD:
        return False  # the common case: nothing below SOFT HYPHEN is default-ignorable
    if _within(code, _NOT_IGNORABLE) or _within(code, PREPENDED_CONCATENATION_MARK):
        return False
    return unicodedata.category(char) == "Cf" or _within(code, OTHER_DEFAULT_IGNORABLE) or _within(code, VARIATION_SELECTOR)


def is_variation_selector(char: str) -> bool:
    """Whether a character is one of Unicode's Variation_Selector code points."""
    return _within(ord(char), VARIATION_SELECTOR)


# Printable letters and symbols that draw as blank space yet are not whitespace to Python (the Hangul fillers are
# default-ignorable too; the Braille blank and the musical null notehead are not).
BLANK_LOOKING = frozenset("\u115f\u1160\u3164\uffa0\u2800\U0001d159")
# The most combining marks one base character may carry: enough for Vietnamese, Hebrew pointing with a cantillation
# mark, or a keycap; more is a "Zalgo" flood that draws over the lines around it.
MAX_MARKS = 4
EMOJI_PRESENTATION = frozenset("\ufe0e\ufe0f")
_KEYCAP_BASES = frozenset("0123456789#*")


@cache  # a body has few distinct characters; a 64 KiB one is judged in milliseconds
def is_mark(char: str) -> bool:
    """A combining mark (nonspacing, spacing or enclosing): it draws on the character before it."""
    return unicodedata.category(char) in ("Mn", "Mc", "Me")


def emoji_variation_allowed(before: str, after: str) -> bool:
    """Whether U+FE0E/U+FE0F between ``before`` and ``after`` is part of an emoji presentation or keycap sequence.

    Without Unicode's emoji data the base is judged by category: a non-ASCII symbol or punctuation mark (❤, ☺, ‼, ©,
    ™), INFORMATION SOURCE (the one emoji that is a letter), or a keycap base followed by U+20E3.
    """
    if not before:
        return False
    if before in _KEYCAP_BASES:
        return after == "\u20e3"
    return before == "\u2139" or (not before.isascii() and unicodedata.category(before)[0] in "SP")


@cache  # a body has few distinct characters; a 64 KiB one is judged in milliseconds
def is_blank_looking(char: str) -> bool:
    """Whether a character draws nothing a reader can see: whitespace, default-ignorable, a mark, or a blank letter."""
    return char.isspace() or char in BLANK_LOOKING or is_default_ignorable(char) or is_mark(char) or unicodedata.category(char) in ("Cc", "Zl", "Zp")


def looks_blank(text: str) -> bool:
    """Whether a person would see nothing at all in the text."""
    return all(is_blank_looking(char) for char in text)


# --- the confusable skeleton (Unicode TR39's idea, with a table of our own) -------------------------------------
# Decision: not Unicode's confusables.txt (6,000+ rows, far beyond what a header needs); a curated table written from
# the classes a header can be disguised in: Greek, Cyrillic, Armenian, Coptic and Cherokee letters, Latin small
# capitals and IPA letters that read as the Latin letters a-z, and the dashes, brackets, equals signs and colons the
# header's punctuation can be drawn with. NFKD first takes care of full-width forms, mathematical alphabets,
# ligatures, circled and parenthesised letters, and precomposed diacritics (whose marks are then dropped).
#
# Uppercase letters whose lowercase reads as a different Latin letter (Greek Eta is "H" but eta is "n"), mapped
# before case folding.
_UPPER = str.maketrans({"Η": "h", "Β": "b", "Ζ": "z", "Μ": "m", "Ν": "n", "Υ": "y", "Ϲ": "c", "Ꮟ": "b"})
_LOWER_CLASSES = {
    "a": "\u0430\u0251\u03b1\u1d00\u2c81\u13aa\u0250",
    "b": "\u0432\u0299\u13f4\u03b2\u0185\u2c83\u13cf",
    "c": "\u0441\u03f2\u1d04\u2ca5\u13df\u217d",
    "d": "\u0501\u0257\u1d05\u13a0\u13e7",
    "e": "\u0435\u0454\u03b5\u1d07\u2c89\u13ac\u04bd\u0259",
    "f": "\u0493\ua730\u03dd",
    "g": "\u0261\u0581\u0262\u13c0\u050d",
    "h": "\u04bb\u043d\u029c\u13bb\u2c8f\u0570\u13c2",
    "i": "\u0456\u0131\u03b9\u04cf\u026a\u13a5\u2c93\u2373",
    "j": "\u0458\u1d0a\u13ab\u03f3",
    "k": "\u043a\u03ba\u1d0b\u13e6\u2c95",
    "l": "\u029f\u13de\u01c0\u05c0",
    "m": "\u043c\u1d0d\u13b7\u2c99",
    "n": "\u0578\u03b7\u0274\u2c9b\u043f",
    "o": "\u043e\u03bf\u0585\u03c3\u1d0f\u2c9f\u13a4\u0d20",
    "p": "\u0440\u03c1\u1d18\u13e2\u2ca3",
    "q": "\u051b",
    "r": "\u0433\u1d26\u0280\u13a1\u13d2\u2c85",
    "s": "\u0455\ua731\u13da\u01bd",
    "t": "\u0442\u03c4\u1d1b\u13a2\u2ca7",
    "u": "\u03c5\u057d\u1d1c\u028b",
    "v": "\u03bd\u0475\u1d20\u13d9",
    "w": "\u051d\u1d21\u13b3\u0461\u03c9",
    "x": "\u0445\u03c7\u2cad\u04b3",
    "y": "\u0443\u04af\u028f\u13a9\u03b3",
    "z": "\u1d22\u13c3",
    "-": "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\u02d7\u2e3a\u2e3b\u30fc\u2796",
    "[": "\u27e6\u3010\u3014\u3016\u3018\u301a\u2045\u2983\u27e8\u2329\u3008",
    "]": "\u27e7\u3011\u3015\u3017\u3019\u301b\u2046\u2984\u27e9\u232a\u3009",
    "=": "\ua78a\u2e40\u30a0\u2550\u2261\u268c",
    ":": "\ua789\u2236\u02d0\u0589\u05c3\u16ec\ufe30\u1361",
}
_LOWER = str.maketrans({char: latin for latin, chars in _LOWER_CLASSES.items() for char in chars})
# Latin letter pairs a reader cannot tell apart (TR39 collapses them too): 0/o; 1, l, I and | ; "rn"/"m".
_COLLAPSE = str.maketrans({"0": "o", "1": "l", "i": "l", "|": "l", "!": "l"})


class _DropBlank(dict[int, str | None]):
    """A str.translate table filled on first sight: blank-looking characters deleted, the rest kept."""

    def __missing__(self, code: int) -> str | None:
        value = None if is_blank_looking(chr(code)) else chr(code)
        self[code] = value
        return value


_DROP_BLANK = _DropBlank()


def skeleton(text: str) -> str:
    """Text as a reader sees it, for comparing: decomposed, marks and invisible or blank characters dropped,
    look-alikes mapped to Latin, case folded, whitespace removed. Two strings that look alike share a skeleton."""
    text = unicodedata.normalize("NFKD", text).translate(_UPPER).casefold()
    text = unicodedata.normalize("NFKD", text)
    kept = text.translate(_DROP_BLANK)
    return kept.translate(_LOWER).translate(_COLLAPSE).replace("rn", "m")


# --- headers in disguise -----------------------------------------------------------------------------------------
_KINDS = (*WORKER_KINDS, *CONTROLLER_KINDS)


def _word(word: str) -> str:
    return re.escape(skeleton(word))


_NAME = _word("herdr") + r"[^a-z0-9]{0,3}" + _word("orchestration")
_KEY = "(?:" + "|".join(_word(key) for key in ("run", "task", "from", "kind", "reply-to")) + ")"
# The header's opening, its name followed by a key (JSON and YAML spellings too), a from/reply-to pair, or a kind
# with a run or task next to it.
_OPENING = re.compile(r"\[" + _NAME)
_NAMED = re.compile(_NAME + r"[^a-z0-9]{0,6}" + _KEY + r"[\"']?[=:]")
_FROM = re.compile(_word("from") + r"[\"']?=")
_REPLY = re.compile(_word("reply-to") + r"[\"']?=")
_KIND = re.compile(_word("kind") + r"[\"']?[=:][\"']?(?:" + "|".join(_word(kind) for kind in _KINDS) + ")")
_PLACE = re.compile("(?:" + _word("run") + "|" + _word("task") + r")[\"']?[=:]")


def header_in_skeleton(seen: str) -> bool:
    """Whether a skeleton holds something a reader or a model would take for an envelope header."""
    if _OPENING.search(seen) or _NAMED.search(seen):
        return True
    if _FROM.search(seen) and _REPLY.search(seen):
        return True
    return bool(_KIND.search(seen) and _PLACE.search(seen))
