"""Delegation packets and the Message Contract grammar; imports nothing from orchestrator or registry."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Eager, and pure: a function named like its module must be bound here, after the module (`packets.inert` is imported
# directly elsewhere, which sets the attribute `inert` to the module).
from packets.errors import EnvelopeError, PacketError, PacketSyntaxError
from packets.inert import inert, inert_line

if TYPE_CHECKING:
    from packets.envelope import (
        CONTROLLER_KINDS,
        DEFAULT_MESSAGE_LIMIT,
        MESSAGE_LIMIT_RANGE,
        WORKER_KINDS,
        Header,
        Message,
        build_controller_message,
        classify_prompt,
        headers_in,
        normalise,
        parse_message,
        render_message,
    )
    from packets.model import AGENT_KINDS, Packet, build_packet
    from packets.render import parse_packet, render_packet
    from packets.validate import (
        REASON_SUMMARIES,
        Accepted,
        KeptAside,
        LedgerView,
        Reason,
        RegisteredWorker,
        Verdict,
        fingerprint,
        looks_like_header,
        message_size,
        oversize,
        screen_body,
        validate,
    )

# Loaded lazily (PEP 562): `from packets import Packet` works as ever, and a worker's callback loads only the Message
# Contract (`packets.envelope`, `packets.screen`, `packets.validate`, `packets.result`, `packets.inert`), never the
# packet and its renderer. Nothing in `packets` imports pydantic.
_HOMES = {
    **dict.fromkeys(
        ("CONTROLLER_KINDS", "WORKER_KINDS", "DEFAULT_MESSAGE_LIMIT", "MESSAGE_LIMIT_RANGE", "classify_prompt", "normalise", "Header", "Message",
         "build_controller_message", "headers_in", "parse_message", "render_message"),
        "packets.envelope",
    ),
    **dict.fromkeys(("REASON_SUMMARIES", "Reason", "looks_like_header", "screen_body"), "packets.screen"),
    **dict.fromkeys(("AGENT_KINDS", "Packet", "build_packet"), "packets.model"),
    **dict.fromkeys(("parse_packet", "render_packet"), "packets.render"),
    **dict.fromkeys(
        ("Accepted", "KeptAside", "LedgerView", "RegisteredWorker", "Verdict", "fingerprint", "message_size", "oversize", "validate"),
        "packets.validate",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'packets' has no attribute {name!r}")
    module = importlib.import_module(home)
    # Bind every name of that module at once: importing `packets.validate` set the attribute `validate` to the
    # module, and the function of that name must win (as with the eager imports this replaces).
    for other, where in _HOMES.items():
        if where == home:
            globals()[other] = getattr(module, other)
    return globals()[name]


__all__ = [
    "AGENT_KINDS",
    "CONTROLLER_KINDS",
    "DEFAULT_MESSAGE_LIMIT",
    "MESSAGE_LIMIT_RANGE",
    "REASON_SUMMARIES",
    "WORKER_KINDS",
    "Accepted",
    "EnvelopeError",
    "Header",
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
    "classify_prompt",
    "fingerprint",
    "headers_in",
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
