"""The Message Contract envelope as a model: parsed by `packets.grammar`, built for the controller, rendered for terminals."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, ValidationError

from packets.errors import PacketError
from packets.grammar import (
    CONTROLLER_KINDS,
    ENVELOPE_PREFIX,
    HEADER_KEYS,
    PACKET_PREFIX,
    PASTE_END,
    PASTE_START,
    WORKER_KINDS,
    ControllerKind,
    MessageKind,
    _tidy,
    classify_prompt,
    normalise,
    parse_envelope,
)
from packets.model import check_task_label, check_token, describe_validation_error

__all__ = [
    "CONTROLLER_KINDS", "ENVELOPE_PREFIX", "HEADER_KEYS", "PACKET_PREFIX", "PASTE_END", "PASTE_START", "WORKER_KINDS",
    "ControllerKind", "Header", "Message", "MessageKind", "build_controller_message", "classify_prompt", "headers_in", "normalise",
    "parse_message", "render_message",
]  # fmt: skip

# A well-formed header anywhere in a text (mid-line too): how two callbacks typed into one prompt look (herdr 0.8.2
# writes a prompt's Enter 300 ms after its text, so a second callback can be typed before the first is submitted).
_HEADER_ANYWHERE_RE = re.compile(
    r"\[herdr-orchestration run=(?P<run>[!-\\^-~]+) task=(?P<task>[!-\\^-~]+) from=(?P<sender>[!-\\^-~]+)"
    r" kind=(?P<kind>update|question|blocked|result|answer|follow-up|stop) reply-to=(?P<reply_to>[!-\\^-~]+)\]"
)


class Message(BaseModel):
    """One parsed envelope: header fields plus the body, both normalised."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    run_id: str
    task: str
    sender: str
    kind: MessageKind
    reply_to: str
    body: str

    def header(self) -> str:
        """The header line exactly as the grammar requires it."""
        return (
            f"{ENVELOPE_PREFIX}run={self.run_id} task={self.task} from={self.sender}"
            f" kind={self.kind} reply-to={self.reply_to}]"
        )


class Header(BaseModel):
    """One header's fields as written; a header found inside a text says only who it names, never that they sent it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    task: str
    sender: str
    kind: MessageKind
    reply_to: str


def headers_in(text: str) -> tuple[Header, ...]:
    """Every exact, well-formed header in ``text``, at a line start or mid-line, in order (look-alikes are not headers)."""
    return tuple(
        Header(run_id=m["run"], task=m["task"], sender=m["sender"], kind=m["kind"], reply_to=m["reply_to"])  # type: ignore[arg-type]
        for m in _HEADER_ANYWHERE_RE.finditer(text)
    )


def parse_message(raw: str) -> Message:
    """Parse raw envelope text as received from a terminal or an inbox; EnvelopeError names the exact problem."""
    envelope = parse_envelope(raw)
    return Message(
        run_id=envelope.run_id, task=envelope.task, sender=envelope.sender, kind=envelope.kind, reply_to=envelope.reply_to, body=envelope.body
    )


def render_message(message: Message) -> str:
    """The envelope text: header line, newline, body (no trailing newline)."""
    return f"{message.header()}\n{message.body}"


def build_controller_message(*, run_id: str, task_label: str, controller_target: str, kind: ControllerKind, body: str) -> str:
    """Build an answer, follow-up or stop for a worker: from and reply-to are both the controller target."""
    if kind not in CONTROLLER_KINDS:
        raise PacketError(f"invalid controller message: kind {kind!r} is not one of {', '.join(CONTROLLER_KINDS)}")
    try:
        check_token(run_id)
        check_task_label(task_label)
        check_token(controller_target)
    except ValueError as error:
        raise PacketError(f"invalid controller message: {error}") from None
    try:
        message = Message(run_id=run_id, task=task_label, sender=controller_target, kind=kind, reply_to=controller_target, body=_tidy(body))
    except ValidationError as error:
        raise PacketError(describe_validation_error(error, "controller message")) from None
    return render_message(message)
