"""File-claim patterns: which repository paths a worker may change, which patterns a plan may use, and proofs that two claims are disjoint."""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable

from orchestrator.layout import quote

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


# --- what a plan may claim, and proofs that two claims of one checkout are disjoint ----------------------------

_GLOB_MAGIC = re.compile(r"[*?\[]")


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a usable claim (relative, `/`-separated, no `.`/`..`, `**` only as a whole segment), or None."""
    if not pattern:
        return "an empty pattern claims nothing; leave the claim empty for read-only work"
    if pattern.startswith("/") or "\\" in pattern:
        return f"{quote(pattern)} must be relative to the checkout, with / separators"
    for segment in pattern.removesuffix("/").split("/"):
        if segment in ("", ".", ".."):
            return f"{quote(pattern)} has an empty, . or .. path segment"
        if "**" in segment and segment != "**":
            return f"{quote(pattern)}: ** must be a whole path segment"
    return None


def _segments(pattern: str) -> list[str]:
    parts = pattern.removesuffix("/").split("/")
    # Any pattern may name a directory and then covers everything below it (the grammar of `matches`, which the
    # verifier uses), so every pattern ends in an implicit `**`.
    return parts if parts[-1] == "**" else [*parts, "**"]


def may_overlap(a: str, b: str) -> bool:
    """False only when no path can fall under both patterns; anything orch cannot prove disjoint counts as overlapping."""
    for x, y in zip(_segments(a), _segments(b), strict=False):
        # Segments line up from the start until the first `**`; after it, any path could be under both.
        if x == "**" or y == "**":
            return True
        if _segments_disjoint(x, y):
            return False
    return True


def _segments_disjoint(x: str, y: str) -> bool:
    magic_x, magic_y = bool(_GLOB_MAGIC.search(x)), bool(_GLOB_MAGIC.search(y))
    if not magic_x and not magic_y:
        return x != y
    if not magic_x:
        return not fnmatch.fnmatchcase(x, y)
    if not magic_y:
        return not fnmatch.fnmatchcase(y, x)
    # Two globs: every match starts with the literal text before the first wildcard and ends with the text after the last.
    px, py = _literal_prefix(x), _literal_prefix(y)
    qx, qy = _literal_suffix(x), _literal_suffix(y)
    return not (px.startswith(py) or py.startswith(px)) or not (qx.endswith(qy) or qy.endswith(qx))


def _literal_prefix(segment: str) -> str:
    match = _GLOB_MAGIC.search(segment)
    return segment[: match.start()] if match else segment


def _literal_suffix(segment: str) -> str:
    last = max(segment.rfind(ch) for ch in "*?[]")
    return segment[last + 1 :]
