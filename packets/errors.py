"""Error roots of the packets core: bad packet values, unparseable packet text, malformed envelopes."""

from __future__ import annotations


class PacketError(Exception):
    """Root of every error this package raises; str(e) is one line meant for a person or an agent."""


class PacketSyntaxError(PacketError):
    """Packet text that does not follow the rendered format, with the 1-based line where it went wrong."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class EnvelopeError(PacketError):
    """A Message Contract envelope that does not follow the grammar; str(e) is the precise reason."""
