"""Resume commands (herdr 0.9.2+): reported once per agent session, exactly, only where herdr and the kind allow it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.errors import HerdrUsageError
from orchestrator.herdr import features_of
from orchestrator.herdr_models import AgentInfo, AgentSession, HerdrFeatures
from orchestrator.resume import report_resume
from registry import WorkerState

RUN = "w1:p1-20261201T080000Z"


@dataclass
class FakeHerdr:
    """A herdr of one release that records every resume report (or refuses them)."""

    version: str = "0.9.5"
    reports: list[tuple[str, str, str, AgentSession, tuple[str, ...]]] = field(default_factory=list)
    refuse: bool = False

    def features(self) -> HerdrFeatures:
        return features_of(self.version)

    def pane_report_agent_session(self, pane_id: str, *, source: str, agent: str, session: AgentSession, resume: tuple[str, ...]) -> None:
        if self.refuse:
            raise HerdrUsageError("herdr pane report-agent-session: herdr rejected orch's arguments: unknown option: --")
        self.reports.append((pane_id, source, agent, session, tuple(resume)))


@pytest.fixture
def herdr() -> FakeHerdr:
    return FakeHerdr()


@pytest.fixture
def engine(tmp_path: Path, herdr: FakeHerdr) -> Iterator[Engine]:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock())  # type: ignore[arg-type]
    engine.ledger.create_run(RUN, controller_target="w1:p1")
    for task, kind in (("feature-a", "claude"), ("feature-b", "codex"), ("feature-c", "pi")):
        engine.ledger.add_worker(RUN, task, name=task, kind=kind, objective="x", pane_id=f"w1:p{task[-1]}", reply_target=task)
        engine.ledger.transition(RUN, task, WorkerState.PROVISIONING, WorkerState.READY)
    yield engine
    engine.close()


def info(pane: str, session: AgentSession | None) -> AgentInfo:
    return AgentInfo(terminal_id="t", agent_status="working", workspace_id="w1", tab_id="w1:t1", pane_id=pane, focused=False,
                     revision=1, state_change_seq=3, agent_session=session)


def test_095_row6_a_claude_session_is_reported_once_with_its_launch_flags(engine: Engine, herdr: FakeHerdr) -> None:
    """herdr 0.9.2+ restores an agent after a restart with the command reported for its session: orch reports the
    exact one (`claude --resume <id>` plus the plan's agent_args), under its own source, once per session."""
    run = engine.ledger.get_run(RUN)
    worker = engine.ledger.get_worker(RUN, "feature-a")
    session = AgentSession(source="herdr:claude", agent="claude", kind="id", value="5d0c-11ee")
    for _ in range(2):
        assert report_resume(engine, run, worker, info("w1:pa", session), ("--model", "opus")) is None
    assert herdr.reports == [("w1:pa", "orch", "claude", session, ("claude", "--resume", "5d0c-11ee", "--model", "opus"))]
    later = AgentSession(source="herdr:claude", agent="claude", kind="id", value="77aa")  # a new session: reported too
    report_resume(engine, run, worker, info("w1:pa", later), ())
    assert [r[4] for r in herdr.reports] == [("claude", "--resume", "5d0c-11ee", "--model", "opus"), ("claude", "--resume", "77aa")]
    facts = [e.detail for e in engine.ledger.events(RUN, task_label="feature-a") if e.kind == "resume_command"]
    assert [f["argv"] for f in facts] == [["claude", "--resume", "5d0c-11ee", "--model", "opus"], ["claude", "--resume", "77aa"]]


def test_095_row6_nothing_is_reported_without_an_exact_resume(engine: Engine, herdr: FakeHerdr) -> None:
    """No session known to herdr, a kind whose resume form orch does not know (codex), a session of another kind or
    shape, a pane that is not the worker's, or a herdr before 0.9.2: nothing is sent."""
    run = engine.ledger.get_run(RUN)
    a, b, c = (engine.ledger.get_worker(RUN, t) for t in ("feature-a", "feature-b", "feature-c"))
    report_resume(engine, run, a, info("w1:pa", None), ())
    report_resume(engine, run, b, info("w1:pb", AgentSession(source="herdr:codex", agent="codex", kind="id", value="x")), ())
    report_resume(engine, run, c, info("w1:pc", AgentSession(source="pi", agent="pi", kind="id", value="x")), ())
    report_resume(engine, run, a, info("w1:p9", AgentSession(source="herdr:claude", agent="claude", kind="id", value="x")), ())
    herdr.version = "0.9.1"
    report_resume(engine, run, a, info("w1:pa", AgentSession(source="herdr:claude", agent="claude", kind="id", value="x")), ())
    assert herdr.reports == []
    herdr.version = "0.9.5"
    report_resume(engine, run, c, info("w1:pc", AgentSession(source="pi", agent="pi", kind="path", value="/s/1.jsonl")), ())
    assert [r[4] for r in herdr.reports] == [("pi", "--session", "/s/1.jsonl")]


def test_095_row6_a_refused_report_is_said_once_and_never_repeated(engine: Engine, herdr: FakeHerdr) -> None:
    run = engine.ledger.get_run(RUN)
    worker = engine.ledger.get_worker(RUN, "feature-a")
    herdr.refuse = True
    session = AgentSession(source="herdr:claude", agent="claude", kind="id", value="5d0c")
    said = [report_resume(engine, run, worker, info("w1:pa", session), ()) for _ in range(2)]
    assert said == ["resume command not reported to herdr: herdr pane report-agent-session: herdr rejected orch's arguments: unknown option: --", None]
