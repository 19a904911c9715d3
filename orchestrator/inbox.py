"""`orch inbox list`: every message of a run in arrival order, with its verdict (recording one is `orchestrator.intake`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from orchestrator.engine import Engine
from packets import inert_line
from registry import InboxVerdict, Run


class InboxEntry(BaseModel):
    """One row of `orch inbox list`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int
    received_at: str
    verdict: InboxVerdict
    reason_code: str | None
    reason: str | None
    task: str | None
    kind: str | None
    sender: str | None
    handled: bool
    first_line: str


class InboxList(BaseModel):
    """Every message of a run, with its verdict."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    messages: tuple[InboxEntry, ...]


def list_messages(engine: Engine, run: Run) -> InboxList:
    """Every message of the run in arrival order, with its verdict."""
    entries = []
    for m in engine.ledger.list_inbox(run.run_id):
        lines = [line for line in m.raw.replace("\r", "\n").split("\n") if line.strip()]
        body = lines[1] if len(lines) > 1 and lines[0].lstrip().startswith("[herdr-orchestration") else (lines[0] if lines else "")
        entries.append(
            InboxEntry(
                id=m.id, received_at=m.received_at.isoformat(timespec="seconds"), verdict=m.verdict,
                reason_code=m.reason_code, reason=m.reason, task=m.task_label, kind=m.kind, sender=m.sender,
                handled=m.handled_at is not None, first_line=body.strip(),
            )
        )  # fmt: skip
    return InboxList(run_id=run.run_id, messages=tuple(entries))


def render_list(listing: InboxList) -> str:
    """A compact table: id, verdict, task, kind, sender, handled, first body line or reason."""
    if not listing.messages:
        return f"Inbox of run {listing.run_id}: no messages\n"
    lines = [f"Inbox of run {listing.run_id}: {len(listing.messages)} message{'s' if len(listing.messages) != 1 else ''}"]
    for m in listing.messages:
        verdict = "accepted" if m.verdict is InboxVerdict.ACCEPTED else f"kept aside ({m.reason_code})"
        handled = "handled" if m.handled else "new"
        lines.append(f"#{m.id} {m.received_at} {verdict} {m.kind or '-'} task={m.task or '-'} from={m.sender or '-'} [{handled}]")
        lines.append(f"    {inert_line((m.reason or '') if m.verdict is InboxVerdict.KEPT_ASIDE else m.first_line)}")
    return "\n".join(lines) + "\n"
