"""herdr id formats: bijective base-32 numbers, workspace/tab/pane ids and the lenient input forms."""

from __future__ import annotations

import re

ALPHABET = "123456789ABCDEFGHJKMNPQRSTVWXYZ0"


def b32(n: int) -> str:
    """Write n >= 1 in herdr's bijective base-32 (1→'1', 32→'0', 33→'11')."""
    if n < 1:
        raise ValueError("bijective numbers start at 1")
    digits = []
    while n > 0:
        n -= 1
        digits.append(ALPHABET[n % 32])
        n //= 32
    return "".join(reversed(digits))


def from_b32(text: str) -> int | None:
    """Inverse of b32; None when text is not a valid number."""
    if not text:
        return None
    n = 0
    for ch in text.upper():
        i = ALPHABET.find(ch)
        if i < 0:
            return None
        n = n * 32 + i + 1
    return n


WS_RE = re.compile(r"^w([1-9A-Z0]+)$")
TAB_RE = re.compile(r"^(w[1-9A-Z0]+):t([1-9A-Z0]+)$")
PANE_RE = re.compile(r"^(w[1-9A-Z0]+):p([1-9A-Z0]+)$")
AGENT_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
SESSION_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
