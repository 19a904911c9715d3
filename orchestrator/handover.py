"""Many callbacks in one call: one stdin split at the caller's separator lines, every message judged and recorded on its own.

Light on purpose (no herdr, no plans): every worker callback of an `orch run` controller is an `orch inbox add`.
The caller (an agent controller) chooses the separator anew for every call. Splitting at header lines instead would
let a worker's body carry a second envelope past the smuggled-header rule: a body line that is an exact header would
become an envelope of its own, in another worker's name. A worker cannot know a separator chosen after its message
was written, so without one stdin is one message and a second header inside it is `injection`.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.inbox import KEPT_PREFIX_BYTES, Inbound, InboxAdded, add_message, render_added
from orchestrator.intake import BATCH_MAX as BATCH_MAX  # the batch limit's home is the fast path; named here as before
from registry import Run

# What a separator may be: long enough that a worker cannot guess it, plain enough to type in a heredoc.
SEPARATOR = re.compile(r"[A-Za-z0-9_-]{12,64}")


class Handed(BaseModel):
    """`orch inbox add`: the verdict on every envelope handed over, in order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    messages: tuple[InboxAdded, ...]


def check_separator(separator: str) -> str:
    """The separator as given, or a one-line error: 12-64 letters, digits, `_` or `-`."""
    if not SEPARATOR.fullmatch(separator):
        raise OrchError(
            f"the separator {separator[:80]!r} is not 12-64 letters, digits, '_' or '-'",
            hint="choose a fresh random word for every call, e.g. `--separator msg_7f3k9q2x4w1m`, and put it alone on the line between two messages",
        )
    return separator


def split_envelopes(raw: str, separator: str | None = None) -> list[str]:
    """One stdin holding any number of envelopes, split at each line that is exactly ``separator``.

    Without a separator the input is one message. Blank pieces (two separators in a row, one at either end) are
    dropped; the blank lines around a separator belong to neither message. Lines end at LF (CR LF) only: U+2028,
    U+0085 or U+001C inside a body are characters of that body (which its rules keep aside), never a place to split,
    and a piece is the message's own text, with nothing added, so it is measured against the limit exactly as it
    would be alone.
    """
    if separator is None:
        return [raw]
    pieces: list[list[str]] = [[]]
    for line in raw.split("\n"):
        if line.rstrip("\r") == separator:
            pieces.append([])
        else:
            pieces[-1].append(line)
    texts = ["\n".join(piece).strip("\r\n") for piece in pieces]
    kept = [text for text in texts if text.strip()]
    return kept or [raw]


def hand_over(
    engine: Engine, run: Run, raw: str | Inbound, *, source: str = "cli", limit: int | None = None, separator: str | None = None
) -> Handed:
    """Validate and record each envelope of ``raw`` (split at ``separator`` lines) on its own, in order.

    An input cut off at the batch limit is one oversize message: where its envelopes end cannot be known.
    """
    if isinstance(raw, Inbound) and not raw.complete:
        return Handed(run_id=run.run_id, messages=(add_message(engine, run, raw, source=source, limit=limit),))
    text = raw.text if isinstance(raw, Inbound) else raw
    pieces = split_envelopes(text, separator)
    if len(pieces) == 1 and isinstance(raw, Inbound) and (separator is None or pieces[0] == text):
        if limit is not None and raw.size > limit:
            # Read up to the batch limit, yet one message over its own limit: keep only the prefix, as the stdin door does.
            kept = raw.text.encode("utf-8", errors="replace")[:KEPT_PREFIX_BYTES].decode("utf-8", errors="replace")
            raw = raw.model_copy(update={"text": kept, "complete": False})
        return Handed(run_id=run.run_id, messages=(add_message(engine, run, raw, source=source, limit=limit),))
    return Handed(run_id=run.run_id, messages=tuple(add_message(engine, run, piece, source=source, limit=limit) for piece in pieces))


def render_handed(result: Handed) -> str:
    """One verdict line per envelope."""
    return "".join(render_added(m) for m in result.messages)
