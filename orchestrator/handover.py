"""Many callbacks in one call: one stdin split at each envelope header, every message judged and recorded on its own.

Light on purpose (no herdr, no plans): every worker callback of an `orch run` controller is an `orch inbox add`.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from orchestrator.engine import Engine
from orchestrator.inbox import KEPT_PREFIX_BYTES, Inbound, InboxAdded, add_message, render_added
from registry import Run

# A header line starts a new envelope: the Message Contract's first line (packets.envelope).
HEADER = re.compile(r"^[ \t]*\[herdr-orchestration[ \t]")
# How many messages of the run's size limit one call may carry: the input is read up to this many limits.
BATCH_MAX = 64


class Handed(BaseModel):
    """`orch inbox add`: the verdict on every envelope handed over, in order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    messages: tuple[InboxAdded, ...]


def split_envelopes(raw: str) -> list[str]:
    """One stdin holding any number of envelopes, split at each header line (text before the first is its own message)."""
    lines = raw.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if HEADER.match(line)]
    if len(starts) <= 1:
        return [raw]
    cuts = ([0] if "".join(lines[: starts[0]]).strip() else []) + starts
    pieces = ["".join(lines[a:b]) for a, b in zip(cuts, [*cuts[1:], len(lines)], strict=True)]
    # The blank lines that separated two envelopes belong to neither.
    return [piece.rstrip("\r\n") + "\n" for piece in pieces]


def hand_over(engine: Engine, run: Run, raw: str | Inbound, *, source: str = "cli", limit: int | None = None) -> Handed:
    """Validate and record each envelope of ``raw`` on its own (`orchestrator.inbox.add_message`), in order.

    An input cut off at the batch limit is one oversize message: where its envelopes end cannot be known.
    """
    if isinstance(raw, Inbound) and not raw.complete:
        return Handed(run_id=run.run_id, messages=(add_message(engine, run, raw, source=source, limit=limit),))
    text = raw.text if isinstance(raw, Inbound) else raw
    pieces = split_envelopes(text)
    if len(pieces) == 1 and isinstance(raw, Inbound):
        if limit is not None and raw.size > limit:
            # Read up to the batch limit, yet one message over its own limit: keep only the prefix, as the stdin door does.
            kept = raw.text.encode("utf-8", errors="replace")[:KEPT_PREFIX_BYTES].decode("utf-8", errors="replace")
            raw = raw.model_copy(update={"text": kept, "complete": False})
        return Handed(run_id=run.run_id, messages=(add_message(engine, run, raw, source=source, limit=limit),))
    return Handed(run_id=run.run_id, messages=tuple(add_message(engine, run, piece, source=source, limit=limit) for piece in pieces))


def render_handed(result: Handed) -> str:
    """One verdict line per envelope."""
    return "".join(render_added(m) for m in result.messages)
