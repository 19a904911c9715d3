"""One callback handed to the ledger: judged and recorded once, whichever door it came through (argument or stdin).

Light on purpose (no herdr, no plans): every worker records its own callback with `orch inbox add --run RUN TEXT`
from its own shell, for both kinds of controller. There is no batch door: a controller never passes worker text on,
so nothing has to tell where one worker's message ends and another's begins (a second header inside a message is
`injection`: a worker's text cannot speak for another worker).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from orchestrator.engine import Engine
from orchestrator.inbox import KEPT_PREFIX_BYTES, Inbound, InboxAdded, add_message, render_added
from orchestrator.intake import BATCH_MAX as BATCH_MAX  # how much of stdin is read before judging its size (the fast path's rule)
from registry import Run


class Handed(BaseModel):
    """`orch inbox add`: the verdict on the envelope handed over."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    messages: tuple[InboxAdded, ...]


def hand_over(engine: Engine, run: Run, raw: str | Inbound, *, source: str = "cli", limit: int | None = None) -> Handed:
    """Validate and record ``raw`` as one message.

    Input read whole yet over the message limit keeps only its prefix, as the stdin door does for input cut off.
    """
    if isinstance(raw, Inbound) and raw.complete and limit is not None and raw.size > limit:
        kept = raw.text.encode("utf-8", errors="replace")[:KEPT_PREFIX_BYTES].decode("utf-8", errors="replace")
        raw = raw.model_copy(update={"text": kept, "complete": False})
    return Handed(run_id=run.run_id, messages=(add_message(engine, run, raw, source=source, limit=limit),))


def render_handed(result: Handed) -> str:
    """One verdict line per envelope."""
    return "".join(render_added(m) for m in result.messages)
