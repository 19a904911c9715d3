"""`orch resume` continues only what `orch run` started: an agent-driven run's callbacks would never reach it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.herdr import HerdrCli
from orchestrator.progress import Progress
from orchestrator.run import resume_run

RUN = "w1:p1-20261130T080000Z"


def test_resume_refuses_a_run_driven_by_an_agent_controller(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=HerdrCli("herdr-that-is-never-run"), clock=FakeClock(), env={})
    engine.ledger.create_run(RUN, controller_target="w1:p1")

    with pytest.raises(OrchError) as raised:
        resume_run(engine, RUN, Progress(io.StringIO()))

    assert (raised.value.message, raised.value.hint) == (
        f"run {RUN} is driven by an agent controller; `orch resume` continues only runs started by `orch run`",
        "continue it with the granular commands (SKILL.md): orch provision, dispatch, observe --once, verify, retire, report",
    )
    assert engine.ledger.get_run(RUN).status == "active"
    engine.close()
