"""What a person sees of a body: the kept-aside reasons, and the body rules (invisible, control and lookalike-header text); pure."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from enum import StrEnum
from functools import cache

from packets.glyphs import (
    BLANK_LOOKING,
    EMOJI_PRESENTATION,
    MAX_MARKS,
    emoji_variation_allowed,
    header_in_skeleton,
    is_default_ignorable,
    is_mark,
    is_variation_selector,
    looks_blank,
    skeleton,
)
from packets.inert import escape_char, inert_line


class Reason(StrEnum):
    """Why a message was kept aside; the values are stable codes stored in the ledger and shown in reports."""

    OVERSIZE = "oversize"
    MALFORMED_HEADER = "malformed_header"
    UNKNOWN_RUN = "unknown_run"
    STALE_RUN = "stale_run"
    UNKNOWN_TASK = "unknown_task"
    WRONG_SENDER = "wrong_sender"
    WRONG_REPLY_TO = "wrong_reply_to"
    WRONG_PANE = "wrong_pane"
    WRONG_DIRECTION = "wrong_direction"
    EMPTY_BODY = "empty_body"
    INJECTION = "injection"
    REPORT_OUTSIDE = "report_outside"
    DUPLICATE = "duplicate"
    OUT_OF_TURN = "out_of_turn"


REASON_SUMMARIES: dict[Reason, str] = {
    Reason.OVERSIZE: "The message is larger than the limit; only a bounded prefix, its size and its hash are kept.",
    Reason.MALFORMED_HEADER: "The text is not a well-formed Message Contract envelope.",
    Reason.UNKNOWN_RUN: "The run id is neither the current run nor any run the ledger knows.",
    Reason.STALE_RUN: "The run id belongs to an earlier or finished run.",
    Reason.UNKNOWN_TASK: "No worker is registered for this task label in the current run.",
    Reason.WRONG_SENDER: "The sender is not the worker registered for the task.",
    Reason.WRONG_REPLY_TO: "The reply-to target is not the target registered for the task's worker.",
    Reason.WRONG_PANE: "The callback was run from another registered worker's herdr pane.",
    Reason.WRONG_DIRECTION: "A controller kind (answer, follow-up, stop) arrived at the controller.",
    Reason.EMPTY_BODY: "The body is empty or only whitespace.",
    Reason.INJECTION: "The body holds a control or invisible character, an escape sequence, or a line that looks like an envelope header.",
    Reason.REPORT_OUTSIDE: "A result names a report path outside the places the worker may write.",
    Reason.DUPLICATE: "The same run, task, sender, kind and body were already accepted.",
    Reason.OUT_OF_TURN: "The worker's state does not take this kind of message now (closed, accepted, verifying, waiting, or a question already open).",
}


# Escape sequences by the character after ESC (ECMA-48): what a terminal would start to obey.
_SEQUENCES = {"[": "CSI", "]": "OSC", "P": "DCS", "_": "APC", "^": "PM", "X": "SOS"}
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Joiners shape Persian and Indic text and emoji sequences; every other format character is refused (docs/message-contract.md).
_SHAPING = frozenset("\u200c\u200d")
_HANGUL_FILLERS = frozenset("\u115f\u1160\u3164\uffa0")
_PLAIN = re.compile(r"[\t\n\x20-\x7e]*")


@cache
def _forbidden(char: str) -> str | None:
    """What a body character is when it is never allowed, whatever stands around it (None when it may be)."""
    code = ord(char)
    if char in "\t\n" or 0x20 <= code < 0x7F:
        return None
    if code == 0x1B:
        return "ESC"
    if code == 0x7F:
        return "DEL"
    if code < 0x20:
        return "a C0 control character"
    if code <= 0x9F:
        return "a C1 control character"
    if char in _BIDI:
        return "a bidi embedding, override or isolate"
    if 0xE0000 <= code <= 0xE007F:
        return "a Unicode tag character"
    category = unicodedata.category(char)
    if category in ("Zl", "Zp"):
        return "a line or paragraph separator"
    if category == "Cs":
        return "an undecodable byte"
    if category == "Cf" and char not in _SHAPING:
        return "an invisible formatting character"
    if char in _HANGUL_FILLERS:
        return "a Hangul filler"
    if char in BLANK_LOOKING:
        return "a blank-looking character"
    if char == "\u034f":
        return "a combining grapheme joiner"
    if is_default_ignorable(char) and char not in _SHAPING and not is_variation_selector(char):
        return "a default-ignorable character"
    return None


def _misplaced(line: str, index: int, marks: int) -> str | None:
    """What an allowed-in-context character is when its neighbours do not allow it (None when they do)."""
    char = line[index]
    before = line[index - 1] if index else ""
    after = line[index + 1] if index + 1 < len(line) else ""
    if char in _SHAPING:
        visible = all(side and not side.isspace() and side not in _SHAPING for side in (before, after))
        return None if visible else "a joiner with nothing to join"
    if is_variation_selector(char):
        if char in EMOJI_PRESENTATION and emoji_variation_allowed(before, after):
            return None
        return "a variation selector outside an emoji sequence"
    if is_mark(char):
        if not before or before.isspace():
            return "a combining mark with no character to carry it"
        if marks > MAX_MARKS:
            return f"a flood of combining marks (more than {MAX_MARKS} on one character)"
    return None


def _offender(what: str, line: str, column: int) -> str:
    if what == "ESC":
        after = line[column : column + 1]
        name = _SEQUENCES.get(after)
        shown = inert_line(line[column - 1 : column + 11])
        return f"an escape sequence ({name} {shown})" if name else f"an escape character ({shown})"
    char = line[column - 1]
    return f"{what} ({inert_line(char) if char.isascii() else escape_char(char)})"


def _character_rule(lines: Sequence[str]) -> tuple[int, int, str] | None:
    """The first character a person would not see as it is: (line, column, what it is), or None."""
    for number, line in enumerate(lines, start=1):
        if line.isascii() and _PLAIN.fullmatch(line):
            continue
        marks = 0
        for index, char in enumerate(line):
            marks = marks + 1 if is_mark(char) else 0
            what = _forbidden(char) or _misplaced(line, index, marks)
            if what is not None:
                return number, index + 1, what
    return None


def looks_like_header(line: str) -> bool:
    """Whether a body line would pass for an envelope header to a reader or a model, however it is disguised."""
    return header_in_skeleton(skeleton(line))


# A header split over lines is looked for in every run of up to this many lines, then in the whole body.
_WINDOW = 6


def _header_rule(lines: Sequence[str]) -> str | None:
    """Where the body holds something a reader would take for an envelope header, or None."""
    seen = [skeleton(line) for line in lines]
    for number, line in enumerate(lines, start=1):
        if header_in_skeleton(seen[number - 1]):
            shown = inert_line(line if len(line) <= 60 else line[:60] + "…")
            return f'body line {number} looks like an envelope header ("{shown}")'
    for size in range(2, _WINDOW + 1):
        for start in range(len(lines) - size + 1):
            if header_in_skeleton("".join(seen[start : start + size])):
                return f"body lines {start + 1}-{start + size} read together look like an envelope header"
    if len(lines) > _WINDOW and (_NAME_ONLY in "".join(seen)) and header_in_skeleton("".join(seen)):
        return "the body read across its lines holds an envelope header"
    return None


_NAME_ONLY = skeleton("orchestration")


def screen_body(body: str) -> tuple[Reason, str] | None:
    """The body rules: not blank, every character one a person sees as it is, no second header; first failure wins."""
    if not body.strip():
        shown = "empty" if not body else f"only whitespace ({inert_line(body[:40])})"
        return Reason.EMPTY_BODY, f"the body is {shown}; send one header line followed by a concise message or a report path"
    lines = body.split("\n")
    found = None if _PLAIN.fullmatch(body) else _character_rule(lines)
    if found is not None:
        number, column, what = found
        return Reason.INJECTION, (
            f"body line {number}, column {column}: {_offender(what, lines[number - 1], column)}; "
            "a message holds printable text, tabs and newlines only"
        )
    if looks_blank(body):
        return Reason.EMPTY_BODY, (
            f"the body shows nothing a person can see ({inert_line(body[:40])}); "
            "send one header line followed by a concise message or a report path"
        )
    where = _header_rule(lines)
    if where is not None:
        return Reason.INJECTION, f"{where}; a message has one header, its first line"
    return None
