"""Delegation packets and the Message Contract grammar; imports nothing from orchestrator or registry."""

from packets.envelope import (
    CONTROLLER_KINDS,
    WORKER_KINDS,
    Message,
    build_controller_message,
    classify_prompt,
    normalise,
    parse_message,
    render_message,
)
from packets.errors import EnvelopeError, PacketError, PacketSyntaxError
from packets.inert import inert, inert_line
from packets.model import AGENT_KINDS, DEFAULT_MESSAGE_LIMIT, MESSAGE_LIMIT_RANGE, Packet, build_packet
from packets.render import parse_packet, render_packet
from packets.validate import (
    REASON_SUMMARIES,
    Accepted,
    KeptAside,
    LedgerView,
    Reason,
    RegisteredWorker,
    Verdict,
    build_view,
    fingerprint,
    looks_like_header,
    message_size,
    oversize,
    screen_body,
    validate,
)

__all__ = [
    "AGENT_KINDS",
    "CONTROLLER_KINDS",
    "DEFAULT_MESSAGE_LIMIT",
    "MESSAGE_LIMIT_RANGE",
    "REASON_SUMMARIES",
    "WORKER_KINDS",
    "Accepted",
    "EnvelopeError",
    "KeptAside",
    "LedgerView",
    "Message",
    "Packet",
    "PacketError",
    "PacketSyntaxError",
    "Reason",
    "RegisteredWorker",
    "Verdict",
    "build_controller_message",
    "build_packet",
    "build_view",
    "classify_prompt",
    "fingerprint",
    "inert",
    "inert_line",
    "looks_like_header",
    "message_size",
    "oversize",
    "screen_body",
    "normalise",
    "parse_message",
    "parse_packet",
    "render_message",
    "render_packet",
    "validate",
]
