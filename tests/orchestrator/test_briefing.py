"""Delegation packets built from examples/plan.toml and a real ledger: golden texts, defaults, saving, size limits."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.briefing import PACKET_LIMIT_BYTES, brief
from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from packets import parse_packet
from registry import Run

ROOT = Path(__file__).resolve().parents[2]
BASE_SHA = "1" * 40
RUN_ID = "w1:p1-20261130T080000Z"


class NoHerdr:
    """Briefing never talks to herdr (it only names the binary in the callback command); any call is a bug."""

    binary = "herdr"

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"briefing called herdr.{name}")


def make_engine(tmp_path: Path, controller: str = "agent") -> Engine:
    settings = Settings(home=tmp_path / "home", orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=Path("/src"))
    return Engine(settings=settings, herdr=NoHerdr(), clock=FakeClock(), env={}, controller=controller)  # type: ignore[arg-type]


def start_run(engine: Engine, plan_text: str | None = None) -> Run:
    """A run of the example plan (or ``plan_text``) with every worker registered, as preflight and provisioning leave it."""
    run_dir = engine.run_dir(RUN_ID)
    run_dir.mkdir(parents=True)
    if plan_text is None:
        shutil.copy(ROOT / "examples" / "plan.toml", run_dir / "plan.toml")
    else:
        (run_dir / "plan.toml").write_text(plan_text)
    run = engine.ledger.create_run(
        RUN_ID, controller_target="w1:p1", organization="acme", repo="widgets", repo_path="/src/acme/widgets",
        base_ref="origin/main", base_sha=BASE_SHA, plan_path="plan.toml",
    )
    for planned in engine.plan_for(run).workers:
        engine.ledger.add_worker(RUN_ID, planned.task, name=planned.name, kind=planned.kind, objective=planned.worker.objective,
                                 claimed_files=planned.worker.claim, worktree_path=str(planned.worktree.path))
    return run


@pytest.mark.parametrize("task", ["api-pagination", "api-tests", "pagination-docs"])
def test_example_plan_packets(tmp_path: Path, task: str, golden: Callable[[str, str], None]) -> None:
    engine = make_engine(tmp_path)
    run = start_run(engine)

    briefing = brief(engine, run, task)

    # Every worker records its callback in the run's durable inbox itself, whatever its controller.
    prefix = " ".join(engine.callback_prefix(run))
    assert engine.callback_prefix(run)[-4:] == ("inbox", "add", "--run", RUN_ID)
    golden(f"packet_{task}.md", briefing.text.replace(prefix, "<callback-prefix>").replace(str(tmp_path), "<tmp>"))
    assert parse_packet(briefing.text) == briefing.packet
    assert briefing.path == engine.run_dir(RUN_ID) / "packets" / f"{task}.md"
    assert briefing.path.read_text() == briefing.text
    assert (briefing.size, briefing.moved) == (len(briefing.text.encode()), {})


def test_show_without_saving_writes_nothing(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    run = start_run(engine)

    briefing = brief(engine, run, "api-pagination", save=False)

    assert not briefing.path.parent.exists()
    assert briefing.text == brief(engine, run, "api-pagination").text


PLAN = """
organization = "acme"
repo = "widgets"
base = "origin/main"

[[workers]]
task = "big-task"
objective = "{objective}"
deliverable = "A report."
branch = "feat/big"
claim = {claim}
"""


def test_oversized_objective_moves_to_a_context_file(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    objective = "Refactor everything. " * 4000
    run = start_run(engine, PLAN.format(objective=objective, claim='["src/**"]'))

    briefing = brief(engine, run, "big-task")

    moved = engine.run_dir(RUN_ID) / "packets" / "big-task.objective.md"
    assert briefing.moved == {"objective": moved}
    assert briefing.size <= PACKET_LIMIT_BYTES
    assert briefing.packet.context_files == (str(moved),)
    assert briefing.packet.objective == f"Too long for a prompt: read the full objective in {moved} before you start; it is part of this packet."
    assert moved.read_text() == f"# Objective of task big-task (run {RUN_ID})\n\n{objective}\n"


def test_read_only_worker_gets_a_packet_that_forbids_every_change(tmp_path: Path, golden: Callable[[str, str], None]) -> None:
    engine = make_engine(tmp_path)
    run = start_run(engine, PLAN.format(objective="Review the API.", claim="[]"))

    briefing = brief(engine, run, "big-task")

    golden("packet_read_only.md", briefing.text.replace(" ".join(engine.callback_prefix(run)), "<callback-prefix>").replace(str(tmp_path), "<tmp>"))
    assert briefing.packet.file_claim == ()
    assert parse_packet(briefing.text) == briefing.packet


def test_missing_base_sha_is_one_line(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    run = dataclasses.replace(start_run(engine), base_sha=None)

    with pytest.raises(OrchError) as caught:
        brief(engine, run, "api-tests")

    assert (caught.value.message, caught.value.hint) == (
        f"run {RUN_ID} has no base SHA for api-tests", "run `orch preflight PLAN` first: it resolves the base ref")
