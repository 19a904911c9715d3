"""Resume commands (herdr 0.9.2+): tell herdr how to bring a worker's agent session back, with its launch flags, after
a herdr restart (`pane report-agent-session … -- RESUME_ARG…`, ../herdr-0.9.5/DELTA.md row 6).

Reported once per agent session, and only for an exact resume: the session herdr already holds for the pane (its
integration reported it) and a kind whose CLI resumes that very session by id or path. A "continue the latest
session" form is never used: workers of one repository could resume each other's sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from orchestrator.agents import facts
from orchestrator.engine import Engine
from orchestrator.errors import HerdrError
from orchestrator.herdr_models import AgentInfo, AgentSession
from registry.facts import FactKind, ResumeCommand, read_facts
from registry import Run, Worker

# The source orch reports under: its own, so an agent's hook keeps its own reports.
SOURCE = "orch"

# kind -> (the session kind herdr holds for it, how its CLI resumes that session with the launch args after it). codex
# is left out: `codex resume <id>` is a subcommand, and whether it takes the interactive launch flags is not known.
RESUME: dict[str, tuple[str, Callable[[str, str, Sequence[str]], list[str]]]] = {
    "claude": ("id", lambda exe, value, args: [exe, "--resume", value, *args]),
    "opencode": ("id", lambda exe, value, args: [exe, "--session", value, *args]),
    "pi": ("path", lambda exe, value, args: [exe, "--session", value, *args]),
}


def resume_argv(kind: str, session: AgentSession, args: Sequence[str]) -> list[str] | None:
    """The command that resumes exactly this session with the worker's launch args, or None when orch knows none."""
    form = RESUME.get(kind)
    if form is None or form[0] != session.kind or not session.value or session.agent != kind:
        return None
    return form[1](facts(kind).executable, session.value, args)


def report_resume(engine: Engine, run: Run, worker: Worker, info: AgentInfo, args: Sequence[str]) -> str | None:
    """Report the worker's resume command to herdr once per session; a line for the person when herdr refused it."""
    session = info.agent_session
    if session is None or worker.pane_id is None or info.pane_id != worker.pane_id:
        return None
    argv = resume_argv(worker.kind, session, args)
    herdr = engine.herdr_of(worker)
    if argv is None or not herdr.features().resume_commands:
        return None
    done = read_facts(engine.ledger.events(run.run_id, task_label=worker.task_label), ResumeCommand)
    if any(d.get("session") == session.value for d in done):
        return None  # reported (or refused) for this session already: a report is never repeated
    detail = ResumeCommand(session=session.value, argv=list(argv), pane_id=worker.pane_id)
    try:
        herdr.pane_report_agent_session(worker.pane_id, source=SOURCE, agent=worker.kind, session=session, resume=argv)
    except HerdrError as exc:
        engine.ledger.record_fact(run.run_id, FactKind.RESUME_COMMAND, task_label=worker.task_label, detail=ResumeCommand(**detail, error=exc.message))
        return f"resume command not reported to herdr: {exc.message}"
    engine.ledger.record_fact(run.run_id, FactKind.RESUME_COMMAND, task_label=worker.task_label, detail=detail)
    return None
