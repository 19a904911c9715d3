"""File-claim patterns: which repository paths a worker may change, and proofs that two claims are disjoint."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

# Claim grammar (relative to the checkout root, '/'-separated):
#   "src/api/"      a directory: everything below it
#   "src/api"       that exact path, or everything below it when it is a directory
#   "*", "?"        any run of characters / one character inside one path segment
#   "**"            any number of whole segments (including none)
_WILDCARDS = re.compile(r"\*\*|\*|\?")


def normalise(pattern: str) -> str:
    """Strip './' prefixes and duplicate slashes; keep a trailing '/' (it means a directory)."""
    trailing = pattern.endswith("/")
    parts = [p for p in pattern.strip().split("/") if p not in ("", ".")]
    return "/".join(parts) + ("/" if trailing and parts else "")


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str]:
    pattern = normalise(pattern)
    body = pattern.rstrip("/")
    out: list[str] = []
    pos = 0
    for match in _WILDCARDS.finditer(body):
        out.append(re.escape(body[pos : match.start()]))
        token = match.group()
        if token == "**":
            # "a/**/b" also matches "a/b": swallow the following slash into the optional group.
            if body[match.end() : match.end() + 1] == "/":
                out.append("(?:[^/]+/)*")
                pos = match.end() + 1
                continue
            out.append(".*")
        elif token == "*":
            out.append("[^/]*")
        else:
            out.append("[^/]")
        pos = match.end()
    out.append(re.escape(body[pos:]))
    # A claim on a directory (or on a name that turns out to be one) covers everything below it.
    return re.compile("".join(out) + "(?:/.*)?")


def matches(path: str, pattern: str) -> bool:
    """True when ``path`` (relative, '/'-separated) is covered by the claim ``pattern``."""
    return _regex(pattern).fullmatch(normalise(path)) is not None


def covered(path: str, claim: Iterable[str]) -> bool:
    """True when any pattern of ``claim`` covers ``path``."""
    return any(matches(path, pattern) for pattern in claim)


def outside(paths: Iterable[str], claim: Iterable[str]) -> list[str]:
    """The paths that no pattern of ``claim`` covers, sorted."""
    claim = list(claim)
    return sorted(p for p in paths if not covered(p, claim))
