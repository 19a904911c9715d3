"""The scheduler over a real ledger and plan snapshot: the cap, `after`, skipped chains, and who holds a slot."""

from __future__ import annotations

from pathlib import Path

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.herdr import HerdrCli
from orchestrator.plan import load_plan
from orchestrator.schedule import admit, render_schedule, slot_holders, waiting_reasons
from registry import WorkerState
from registry.facts import FactKind

S = WorkerState
RUN = "w1:p1-20261130T080000Z"

PLAN = """\
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 2
""" + "".join(
    f"""
[[workers]]
task = "{task}"
objective = "Do {task}."
deliverable = "src/{task}/"
branch = "feat/{task}"
claim = ["src/{task}/"]
{after}
"""
    for task, after in (("a", ""), ("b", 'after = ["a"]'), ("c", 'after = ["b"]'), ("d", ""), ("e", ""))
)


def _engine(tmp_path: Path, text: str = PLAN) -> Engine:
    env = {"HOME": str(tmp_path / "home"), "ORCH_HOME": str(tmp_path / "orch-home"), "ORCH_SRC_ROOT": str(tmp_path / "src")}
    settings = Settings.from_env(env)
    engine = Engine(settings=settings, herdr=HerdrCli("herdr-unused", env=env), clock=FakeClock(), env=env)
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(text)
    plan = load_plan(plan_file, settings)
    engine.ledger.create_run(RUN, controller_target="w1:p1", base_ref="main", plan_path=plan_file)
    engine.run_dir(RUN).mkdir(parents=True)
    (engine.run_dir(RUN) / "plan.toml").write_text(text)
    for w in plan.workers:
        engine.ledger.add_worker(RUN, w.task, name=w.name, kind=w.kind, objective="x", initial=S.QUEUED)
    return engine


def _walk(engine: Engine, task: str, *states: WorkerState) -> None:
    for state in states:
        engine.ledger.transition(RUN, task, engine.ledger.get_worker(RUN, task).state, state, cause={"test": True})


def test_admission_holds_the_cap_and_says_why_each_worker_waits(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    run = engine.ledger.get_run(RUN)

    first = admit(engine, run)

    assert render_schedule(first) == [
        "a: started (slot 1 of 2)",
        "d: started (slot 2 of 2)",
        "b: queued, waits for a (a is provisioning)",  # as it stands once this pass admitted a
        "c: queued, waits for b (b is queued)",
        "e: queued, waiting for a slot (2 of 2 in use: a, d)",
    ]
    # Nothing changes on a second pass while both slots are held.
    assert admit(engine, run).started == ()
    assert waiting_reasons(engine, run) == {"b": "waits for a (a is provisioning)", "c": "waits for b (b is queued)", "e": "waiting for a slot (2 of 2 in use)"}


def test_a_finished_worker_holds_its_slot_until_its_agent_exited(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    run = engine.ledger.get_run(RUN)
    admit(engine, run)
    _walk(engine, "a", S.READY, S.DISPATCHED, S.WORKING, S.RESULT, S.VERIFYING, S.ACCEPTED)

    assert [w.task_label for w in slot_holders(engine, run)] == ["a", "d"]
    assert admit(engine, run).started == ()
    engine.ledger.record_fact(RUN, FactKind.AGENT_EXITED, task_label="a", detail={"how": "/exit"})
    second = admit(engine, run)

    assert render_schedule(second) == ["b: started (slot 2 of 2)", "c: queued, waits for b (b is provisioning)", "e: queued, waiting for a slot (2 of 2 in use: d, b)"]


def test_a_worker_that_failed_before_its_agent_started_frees_its_slot_at_once(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    run = engine.ledger.get_run(RUN)
    admit(engine, run)
    _walk(engine, "d", S.FAILED)

    assert admit(engine, run).started == ("e",)


def test_a_rejected_predecessor_skips_its_chain_with_the_reason(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    run = engine.ledger.get_run(RUN)
    admit(engine, run)
    _walk(engine, "a", S.READY, S.DISPATCHED, S.WORKING, S.RESULT, S.VERIFYING, S.REJECTED)

    schedule = admit(engine, run)

    assert [(q.task, q.reason, q.chain) for q in schedule.skipped] == [
        ("b", "after a, which was rejected", ("a",)),
        ("c", "after b, which was skipped (the chain a -> b -> c began when a was rejected)", ("a", "b")),
    ]
    assert [engine.ledger.get_worker(RUN, t).state for t in ("b", "c")] == [S.SKIPPED, S.SKIPPED]


SIBLINGS = """\
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 3
""" + "".join(
    f"""
[[workers]]
task = "{task}"
objective = "Do {task}."
deliverable = "src/{task}/"
branch = "{branch}"
claim = ["src/{task}/"]
"""
    for task, branch in (("a", "feat/a"), ("owner", "feat/shared"), ("sibling", "feat/shared"), ("later", "feat/later"))
)


def test_a_sibling_whose_owner_is_admitted_in_the_same_pass_keeps_its_place_in_plan_order(tmp_path: Path) -> None:
    """The owner's pane is made first in the same provisioning, so the sibling need not wait for a later pass while a
    worker after it in the plan takes the free slot (it did: 'after owner, whose pane it splits (queued)')."""
    engine = _engine(tmp_path, SIBLINGS)
    run = engine.ledger.get_run(RUN)

    first = admit(engine, run)

    assert render_schedule(first) == [
        "a: started (slot 1 of 3)",
        "owner: started (slot 2 of 3)",
        "sibling: started (slot 3 of 3)",
        "later: queued, waiting for a slot (3 of 3 in use: a, owner, sibling)",
    ]


def test_a_worker_rejected_in_this_door_call_keeps_its_slot_so_it_can_be_sent_back(tmp_path: Path) -> None:
    # The agent controller learns of a rejection from the call that made it: until its next check-in the rejected
    # worker's agent stays (and its slot with it), so `orch send` can still send it back; e waits meanwhile.
    from orchestrator.fleet import advance

    engine = _engine(tmp_path)
    run = engine.ledger.get_run(RUN)
    admit(engine, run)
    _walk(engine, "a", S.READY, S.DISPATCHED, S.WORKING)
    _walk(engine, "d", S.READY, S.DISPATCHED, S.WORKING, S.RESULT, S.VERIFYING, S.REJECTED)

    steps = advance(engine, run, hold=["d"])

    assert [(s.task, s.what, s.text) for s in steps] == [
        ("d", "kept", "rejected: agent kept with its slot until the next check-in, so it can be sent back (`orch send`); then its slot is freed unless it was"),
    ]
    assert [w.task_label for w in slot_holders(engine, run)] == ["a", "d"]
    assert engine.ledger.get_worker(RUN, "e").state is S.QUEUED
