"""Validation of inbound envelopes against a view of the ledger, as plain values: the rules `packets.validate` applies; pure (no pydantic)."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import unicodedata
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING, Protocol

from packets.errors import EnvelopeError
from packets.grammar import CONTROLLER_KINDS, DEFAULT_MESSAGE_LIMIT, MESSAGE_LIMIT_RANGE, WORKER_KINDS, Envelope, parse_envelope
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
from packets.result import parse_result

if TYPE_CHECKING:
    from packets.envelope import Message


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


class Registered(Protocol):
    """What validation reads of one registered worker (`packets.validate.RegisteredWorker`, or `PlainWorker`)."""

    @property
    def task_label(self) -> str: ...
    @property
    def worker_name(self) -> str: ...
    @property
    def reply_target(self) -> str: ...
    @property
    def report_roots(self) -> tuple[str, ...]: ...
    @property
    def panes(self) -> tuple[str, ...]: ...
    @property
    def state(self) -> str | None: ...
    @property
    def accepts(self) -> frozenset[str] | None: ...


class View(Protocol):
    """What validation reads of the ledger (`packets.validate.LedgerView`, or `PlainView`)."""

    @property
    def run_id(self) -> str: ...
    @property
    def controller_target(self) -> str: ...
    @property
    def other_run_ids(self) -> Collection[str]: ...
    @property
    def workers(self) -> Sequence[Registered]: ...
    @property
    def accepted_fingerprints(self) -> Collection[str]: ...
    @property
    def message_limit(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PlainWorker:
    """A registered worker as plain values (the callback fast path builds these from ledger rows)."""

    task_label: str
    worker_name: str
    reply_target: str
    report_roots: tuple[str, ...] = ()
    # The herdr panes the worker's process may run in (its pane, and any id it had before herdr renumbered it).
    panes: tuple[str, ...] = ()
    # Its state, and the message kinds that state takes now (`registry.machine.accepted_kinds`); None: not judged.
    state: str | None = None
    accepts: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class PlainView:
    """The ledger view as plain values, held to `LedgerView`'s rules (checked by `check_view`)."""

    run_id: str
    controller_target: str
    other_run_ids: frozenset[str] = frozenset()
    workers: tuple[PlainWorker, ...] = ()
    accepted_fingerprints: frozenset[str] = frozenset()
    message_limit: int = DEFAULT_MESSAGE_LIMIT


def check_view(view: View) -> str | None:
    """What breaks the view's rules (`LedgerView`'s validator says the same), or None."""
    labels = [worker.task_label for worker in view.workers]
    if len(labels) != len(set(labels)):
        return "each task label must belong to exactly one registered worker"
    if view.run_id in view.other_run_ids:
        return "the current run id cannot also be an other run id"
    if not MESSAGE_LIMIT_RANGE[0] <= view.message_limit <= MESSAGE_LIMIT_RANGE[1]:
        return f"message_limit {view.message_limit} is outside {MESSAGE_LIMIT_RANGE[0]}-{MESSAGE_LIMIT_RANGE[1]}"
    return None


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict as plain values: ``reason`` None means accepted (with its task and fingerprint)."""

    reason: Reason | None
    explanation: str
    envelope: Envelope | None = None
    task_label: str | None = None
    fingerprint: str | None = field(default=None)


def fingerprint(message: Envelope | Message) -> str:
    """A stable sha256 over run, task, sender, kind and the normalised body (reply-to is deliberately left out)."""
    fields = [message.run_id, message.task, message.sender, message.kind, message.body]
    encoded = json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()


def message_size(raw_text: str) -> int:
    """The size the limit applies to: UTF-8 bytes of the text exactly as received."""
    return len(raw_text.encode("utf-8", errors="surrogatepass"))


def oversize_explanation(size: int, sha256: str, limit: int) -> str:
    """Why a message over the limit is kept aside, from its size and hash alone (the stdin door never holds all of it)."""
    return (
        f"the message is {size} bytes, over the {limit}-byte limit (sha256 {sha256}); "
        "large content belongs in a report file, sent by path"
    )




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


def _confine(path: str, roots: tuple[str, ...], resolve: Callable[[str], str]) -> str | None:
    """Why a report path is not one the worker may write (None when it is)."""
    if path.startswith("~"):
        return "starts with ~ (never expanded: give the absolute path)"
    if not posixpath.isabs(path):
        return "is not an absolute path"
    if ".." in path.split("/"):
        return 'contains ".."'
    try:
        real = resolve(path)
    except (OSError, ValueError):  # a path swapped while it was resolved: nothing orch can vouch for
        return "cannot be resolved"
    for root in roots:
        # Roots come as real paths, pinned before the worker ran: resolving them again would follow a worker's swap.
        base = posixpath.normpath(root)
        if real == base or real.startswith(base.rstrip("/") + "/"):
            return None
    where = ", ".join(roots) if roots else "no directory (none is registered for this worker)"
    return f"resolves outside {where}" if real != posixpath.normpath(path) else f"is outside {where}"


# How much of one header value an explanation quotes: values have no length limit of their own but the message's.
_QUOTED = 80


def _q(value: str) -> str:
    return value if len(value) <= _QUOTED else value[: _QUOTED - 1] + "…"


def judge(
    raw_text: str, view: View, *, resolve: Callable[[str], str] = posixpath.normpath, pane: str | None = None
) -> Judgement:
    """Decide whether an inbound envelope is accepted for a task or kept aside, and why; never raises for bad input.

    The steps run in the order docs/message-contract.md states: size, header, run, task, sender, reply target and
    pane, direction, body, report paths, duplicate, turn; the first failing step is the reason. ``resolve`` maps a
    path to the one it names (the engine passes ``os.path.realpath`` so symlinks count; the default is lexical);
    ``pane`` is the herdr pane the callback was run from (``HERDR_PANE_ID``), None when it was not run from one.
    """
    size = message_size(raw_text)
    if size > view.message_limit:
        digest = hashlib.sha256(raw_text.encode("utf-8", errors="surrogatepass")).hexdigest()
        return Judgement(Reason.OVERSIZE, oversize_explanation(size, digest, view.message_limit))
    try:
        message = parse_envelope(raw_text)
    except EnvelopeError as error:
        return Judgement(Reason.MALFORMED_HEADER, str(error))

    def aside(reason: Reason, explanation: str) -> Judgement:
        return Judgement(reason, explanation, message)

    if message.run_id != view.run_id:
        if message.run_id in view.other_run_ids:
            return aside(Reason.STALE_RUN, f'run "{_q(message.run_id)}" is an earlier or finished run; the current run is "{view.run_id}"')
        return aside(Reason.UNKNOWN_RUN, f'run "{_q(message.run_id)}" is not the current run "{view.run_id}" nor any run the ledger knows')
    worker = next((w for w in view.workers if w.task_label == message.task), None)
    if worker is None:
        return aside(Reason.UNKNOWN_TASK, f'task "{_q(message.task)}" has no registered worker in run "{view.run_id}"')
    if message.sender != worker.worker_name:
        return aside(Reason.WRONG_SENDER, f'sender "{_q(message.sender)}" is not "{worker.worker_name}", the worker registered for task "{_q(message.task)}"')
    if message.reply_to != worker.reply_target:
        return aside(
            Reason.WRONG_REPLY_TO,
            f'reply-to "{_q(message.reply_to)}" is not "{worker.reply_target}", the target registered for worker "{worker.worker_name}"',
        )
    owner = None if pane is None or pane in worker.panes else next((w for w in view.workers if pane in w.panes), None)
    if owner is not None:
        return aside(
            Reason.WRONG_PANE,
            f'sent from pane "{pane}", worker "{owner.worker_name}"\'s pane, not from worker "{worker.worker_name}"\'s ({", ".join(worker.panes)})',
        )
    if message.kind in CONTROLLER_KINDS:
        return aside(
            Reason.WRONG_DIRECTION,
            f'kind "{message.kind}" is sent by the controller ({view.controller_target}), never to it; workers send update, question, blocked or result',
        )
    screened = screen_body(message.body)
    if screened is not None:
        return aside(*screened)
    if message.kind == "result":
        for path in parse_result(message.body).reports:
            why = _confine(path, worker.report_roots, resolve)
            if why is not None:
                return aside(Reason.REPORT_OUTSIDE, f'report path "{path}" {why}; reports belong in the worker\'s working directory or its report directory')
    digest = fingerprint(message)
    if digest in view.accepted_fingerprints:
        return aside(
            Reason.DUPLICATE,
            f'the same {message.kind} from "{_q(message.sender)}" for task "{_q(message.task)}" was already accepted (fingerprint {digest[:12]})',
        )
    if worker.accepts is not None and message.kind not in worker.accepts:
        takes = ", ".join(kind for kind in WORKER_KINDS if kind in worker.accepts) or "no message"
        return aside(
            Reason.OUT_OF_TURN,
            f'worker "{worker.worker_name}" is {worker.state}, which takes {takes} now; this {message.kind} changes nothing (orch keeps it aside for the person)',
        )
    return Judgement(None, "", message, worker.task_label, digest)
