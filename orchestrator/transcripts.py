"""Transcripts kept as evidence: a worker's recent terminal history saved to the run folder before its pane closes."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import HerdrError
from registry.facts import FactKind, Transcript, read_facts

if TYPE_CHECKING:
    from orchestrator.engine import Engine
    from registry import Event, Run, Worker

# herdr caps a recent read at 1000 rows; that much history is the record of what the worker did and said.
TRANSCRIPT_LINES = 1000


def transcript_path(engine: Engine, run: Run, task: str) -> Path:
    """Where a worker's transcript lives: ``<run folder>/transcripts/<task>.txt``."""
    return engine.run_dir(run.run_id) / "transcripts" / f"{task}.txt"


def save_transcript(engine: Engine, run: Run, worker: Worker, pane: str) -> str | None:
    """Save the pane's recent history (a read, no side effect on herdr) and record where; None if it cannot be read.

    Called before the agent exits and its pane closes, on every retire round, so the file always holds the
    latest history; the fact is recorded once per path.
    """
    try:
        text = engine.herdr_of(worker).pane_read(pane, source="recent", lines=TRANSCRIPT_LINES)
    except HerdrError:
        return None
    path = transcript_path(engine, run, worker.task_label)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    known = any(fact.get("path") == str(path) for fact in read_facts(engine.ledger.events(run.run_id, task_label=worker.task_label), Transcript))
    if not known:
        engine.ledger.record_fact(run.run_id, FactKind.TRANSCRIPT, task_label=worker.task_label, detail=Transcript(path=str(path), pane=pane, lines=TRANSCRIPT_LINES))
    return str(path)


def transcript_of(events: Iterable[Event], task: str) -> str | None:
    """The last transcript path the journal records for a task."""
    found = read_facts((e for e in events if e.task_label == task), Transcript)
    return str(found[-1].get("path")) if found else None
