"""A worker on another host that meets its host gone while it starts is held, never failed for it and never a stop of
the run (orchestrator.held): provision and dispatch go on for the others, a later round starts it (reading back what
the dropped link left unknown, never a second create or prompt), and at the run's end a host that never answered is
named in its failure. A worker already at work there whose host stops answering is lost, under the same bound. Against two shared fake herdrs (the controller's and the build box's) and a real ledger."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from fake_herdr import FakeHerdr

from orchestrator import held
from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.dispatch import dispatch, dispatch_key, render_dispatch
from orchestrator.engine import Engine
from orchestrator.errors import HostUnreachable
from orchestrator.fleet import Step, advance, give_up_held, held_expired
from orchestrator.provision import provision, render_provision
from orchestrator.status import build_status, render_status
from registry import EffectStatus, Run, WorkerState
from registry.facts import FactKind

ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "w1:p1-20261130T080000Z"
BOX_CHECKOUT = "/srv/acme/widgets"
GONE = HostUnreachable("herdr --machine buildbox agent get: machine 'buildbox' (session acme): ssh: connect to host me@buildbox port 22: Connection refused")
HOST = f'[hosts.buildbox]\nmachine = "buildbox"\nssh = "me@buildbox"\ncheckout = "{BOX_CHECKOUT}"\n\n[defaults]'
S = WorkerState


def two_hosts(tmp_path: Path, src: Path = Path("/src")) -> tuple[Engine, FakeHerdr, FakeHerdr]:
    """The controller's herdr with api-pagination's and api-tests' agents (w2:p1, w2:p2), the build box's with
    pagination-docs' (w1:p2 there), each idle at its input line, and an engine that reaches the box as `buildbox`
    (the controller's checkout of acme/widgets under ``src``)."""
    checkout = src / "acme" / "widgets"
    herdr = FakeHerdr(cwd=checkout)
    first = herdr.workspace_create(cwd=checkout).root_pane.pane_id
    second = herdr.pane_split(first, direction="down").pane_id
    for pane, task in ((first, "api-pagination"), (second, "api-tests")):
        herdr.add_agent(pane, task, "codex", seq=10, reacts="work", ready=False, completion=None)
        herdr.pane(pane).screen = "› \n"
    box = FakeHerdr(cwd=BOX_CHECKOUT)
    pane = box.tab_create(workspace="w1").root_pane.pane_id
    box.add_agent(pane, "pagination-docs", "claude", seq=10, reacts="work", ready=False, completion=None)
    box.pane(pane).screen = "❯ \n"
    settings = Settings(home=tmp_path / "home", orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=src)
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock(), env={})
    engine.host_herdrs["buildbox"] = box
    herdr.calls.clear()
    box.calls.clear()
    return engine, herdr, box


def make_run(engine: Engine, *, ready: tuple[str, ...]) -> Run:
    """The example plan with pagination-docs on the build box; the ``ready`` workers provisioned, the rest provisioning."""
    run_dir = engine.run_dir(RUN_ID)
    run_dir.mkdir(parents=True)
    text = (ROOT / "examples" / "plan.toml").read_text().replace("[defaults]", HOST, 1)
    (run_dir / "plan.toml").write_text(text.replace('kind = "claude"\n', 'kind = "claude"\nhost = "buildbox"\n', 1))
    repo_path = str(engine.settings.src_root / "acme" / "widgets")
    run = engine.ledger.create_run(RUN_ID, controller_target="w1:p1", organization="acme", repo="widgets", repo_path=repo_path,
                                   base_ref="origin/main", base_sha="1" * 40, plan_path="plan.toml")
    run = engine.ledger.update_run(RUN_ID, workspace_id="w2", repo_tab_id="w2:t1")
    panes = {"api-pagination": "w2:p1", "api-tests": "w2:p2", "pagination-docs": "w1:p2"}
    for planned in engine.plan_for(run).workers:
        engine.ledger.add_worker(RUN_ID, planned.task, name=planned.name, kind=planned.kind, objective=planned.worker.objective,
                                 claimed_files=planned.worker.claim, host=planned.host)
        if planned.task in ready:
            engine.ledger.transition(RUN_ID, planned.task, S.PROVISIONING, S.READY, cause={"test": True},
                                     pane_id=panes[planned.task], worktree_path=str(planned.worktree.path))
    return run


def states(engine: Engine) -> dict[str, str]:
    return {w.task_label: str(w.state) for w in engine.ledger.list_workers(RUN_ID)}


def facts(engine: Engine) -> list[tuple[str, str | None]]:
    kinds = (FactKind.HOST_HELD, FactKind.HOST_ANSWERED)
    return [(e.kind, e.task_label) for e in engine.ledger.events(RUN_ID) if e.kind in kinds]


def wait_out_the_bound(engine: Engine, run: Run) -> list[Step]:
    """The bound, HOLD_LIMIT check-in intervals (60 s) since the worker was held or lost, passes; then it is given up."""
    clock = engine.clock
    assert isinstance(clock, FakeClock)
    clock.advance(held.HOLD_LIMIT * 60 - 1)
    assert not held_expired(engine, run, 60)
    clock.advance(1)
    assert held_expired(engine, run, 60)
    return give_up_held(engine, run, "the run ended before it answered")


def test_a_ready_worker_whose_host_is_gone_is_held_while_the_controllers_workers_get_their_packets(tmp_path: Path) -> None:
    engine, herdr, box = two_hosts(tmp_path)
    run = make_run(engine, ready=("api-pagination", "api-tests", "pagination-docs"))
    box.down = GONE

    gone = dispatch(engine, run)

    assert states(engine) == {"api-pagination": "working", "api-tests": "working", "pagination-docs": "ready"}
    assert [(w.task, w.outcome) for w in gone.workers] == [("api-pagination", "accepted"), ("api-tests", "accepted"), ("pagination-docs", "held")]
    assert gone.ok and box.prompted == [] and len(herdr.prompted) == 2
    assert gone.workers[2].detail == (
        "held: host buildbox did not answer during dispatch (herdr --machine buildbox agent get: machine 'buildbox' (session acme): ssh: "
        "connect to host me@buildbox port 22: Connection refused); it starts once buildbox answers, at a later check-in"
    )
    held_line = gone.workers[2].detail
    assert render_dispatch(gone, width=400) == (
        f"dispatch run {RUN_ID}: 2 accepted, 1 held; 2 prompt(s) sent (fleet, prompts then concurrent acceptance)\n"
        "\n"
        f"task             agent            outcome    state    detail\n"
        f"---------------  ---------------  ---------  -------  {'-' * len(held_line)}\n"
        "api-pagination   api-pagination   accepted   working  accepted: working (seq 11, baseline 10) via agent list\n"
        "api-tests        api-tests        accepted   working  accepted: working (seq 11, baseline 10) via agent list\n"
        f"pagination-docs  pagination-docs  held       ready    {held_line}\n"
    )
    # Tried again while the box is still gone: held once, said once.
    assert [w.outcome for w in dispatch(engine, run, ["pagination-docs"]).workers] == ["held"]
    assert facts(engine) == [("host_held", "pagination-docs")]

    box.down = None
    back = dispatch(engine, run, ["pagination-docs"])

    assert [(w.task, w.outcome) for w in back.workers] == [("pagination-docs", "accepted")]
    assert len(box.prompted) == 1 and "task=pagination-docs" in box.prompted[0][1]
    assert facts(engine) == [("host_held", "pagination-docs"), ("host_answered", "pagination-docs")]


def test_a_packet_whose_link_dropped_is_read_back_on_its_host_when_it_answers_never_sent_twice(tmp_path: Path) -> None:
    engine, _herdr, box = two_hosts(tmp_path)
    run = make_run(engine, ready=("pagination-docs",))
    # The box takes the prompt, then the link drops before its answer, and stays down for the read-back too.
    box.agent("pagination-docs").on_prompt = lambda: setattr(box, "down", GONE)
    box.fail_next("agent prompt", error=GONE, after=True)

    lost = dispatch(engine, run, ["pagination-docs"])

    effect = engine.ledger.find_effect(RUN_ID, dispatch_key("pagination-docs"))
    assert effect is not None and effect.status is EffectStatus.INTENDED  # its outcome unknown: left for read-back
    assert ([w.outcome for w in lost.workers], states(engine)["pagination-docs"], len(box.prompted)) == (["held"], "ready", 1)

    box.down = None
    back = dispatch(engine, run, ["pagination-docs"])

    # Read back on the box (the agent moved past its baseline): done, and the packet was never sent again.
    assert ([w.outcome for w in back.workers], states(engine)["pagination-docs"], len(box.prompted)) == (["accepted"], "working", 1)
    settled = [e.detail for e in engine.ledger.events(RUN_ID, task_label="pagination-docs") if e.kind == FactKind.EFFECT_SETTLED]
    assert [s["answer"] for s in settled] == ["done"]


def test_a_provisioning_worker_whose_host_is_gone_is_held_and_the_round_goes_on(tmp_path: Path, git_repo: Any) -> None:
    engine, herdr, box = two_hosts(tmp_path, tmp_path / "src")
    run = make_run(engine, ready=("api-pagination", "api-tests"))
    box.down = GONE

    result = provision(engine, run)

    assert result.ok and states(engine)["pagination-docs"] == "provisioning"
    # Whole output, each line's columns single-spaced (the paths are the test's own temp dir).
    shown = [" ".join(line.split()) for line in render_provision(result).replace(str(tmp_path), "").splitlines()]
    assert shown == [
        f"provision {RUN_ID} (workspace w2): 2 ready, 0 failed, 1 held for their host",
        "task state pane tab path done",
        "api-pagination ready w2:p1 - /src/acme/widgets.worktrees/widgets-feat-api-pagination already provisioned",
        "api-tests ready w2:p2 - /src/acme/widgets.worktrees/widgets-feat-api-pagination already provisioned",
        "pagination-docs held - - - -",
        "pagination-docs: held: host buildbox did not answer during provision (herdr --machine buildbox agent get: machine 'buildbox' "
        "(session acme): ssh: connect to host me@buildbox port 22: Connection refused); it starts once buildbox answers, at a later check-in",
    ]
    assert box.commands() == ["worktree list"]  # the first read found it gone: nothing else was asked of it
    provision(engine, run)
    assert facts(engine) == [("host_held", "pagination-docs")]


def test_a_held_worker_whose_host_never_answers_is_given_up_at_the_end_of_the_run_its_host_named(tmp_path: Path) -> None:
    engine, _herdr, box = two_hosts(tmp_path)
    run = make_run(engine, ready=("api-pagination", "api-tests", "pagination-docs"))
    box.agent("pagination-docs").on_prompt = lambda: setattr(box, "down", GONE)
    box.fail_next("agent prompt", error=GONE, after=True)
    steps = advance(engine, run)  # a check-in of either door: the controller's workers get their packets
    assert [(s.task, s.what) for s in steps] == [("pagination-docs", "held")]
    clock = engine.clock
    assert isinstance(clock, FakeClock)

    given = wait_out_the_bound(engine, run)

    reason = (
        "host buildbox did not answer since 2026-11-30 08:00:00Z (herdr --machine buildbox agent get: machine 'buildbox' (session acme): "
        "ssh: connect to host me@buildbox port 22: Connection refused); the run ended before it answered, so it never started; "
        "whatever was made for it on buildbox is kept there, never removed blind (its checkout would be "
        "/srv/acme/widgets.worktrees/widgets-docs-pagination-guide)"
    )
    assert [(s.task, s.what, s.text) for s in given] == [("pagination-docs", "given_up", f"failed: {reason}")]
    assert states(engine)["pagination-docs"] == "failed"
    # The prompt's outcome stays unknown: abandoned unmade, never sent again, nothing on the box touched.
    effect = engine.ledger.find_effect(RUN_ID, dispatch_key("pagination-docs"))
    assert effect is not None and effect.status is EffectStatus.ABANDONED and len(box.prompted) == 1
    assert held.held(engine.ledger, RUN_ID) == {}
    shown = render_status(build_status(engine.ledger, RUN_ID, clock.now()), width=400)
    assert shown.split("pagination-docs  pagination-docs  claude  failed   failed         w1:p2 on buildbox  -                -\n", 1)[1] == (
        f"\nhosts not answering:\n  pagination-docs: given up: {reason}\n"
    )


def test_the_agent_controllers_wait_tries_a_held_worker_each_interval_then_gives_it_up_and_wakes(tmp_path: Path) -> None:
    from orchestrator.door import next_steps, wait_run

    engine, _herdr, box = two_hosts(tmp_path)
    run = make_run(engine, ready=("pagination-docs",))
    engine.ledger.update_run(RUN_ID, controller_kind="agent")
    for task in ("api-pagination", "api-tests"):
        engine.ledger.transition(RUN_ID, task, S.PROVISIONING, S.FAILED, cause={"test": True})  # out of the way
    # The box's spool cannot be listed either (ssh exits 255, as ssh does for a host that is gone).
    engine.remote_runner = lambda argv, *, env, timeout: subprocess.CompletedProcess(argv, 255, "", "ssh: connect to host me@buildbox port 22: Connection refused")
    box.down = GONE
    assert [s.what for s in advance(engine, run)] == ["held"]
    [step] = next_steps(engine, run)
    assert (step.do, step.why) == (
        "wait", f"pagination-docs held: host buildbox does not answer, it starts once it does (`orch finish --run {RUN_ID}` ends the run without it): "
        "orch checks in while it waits and returns when something needs you",
    )

    waited = wait_run(engine, run, timeout_s=600, poll_s=5, interval_s=60)

    # Tried at the wait's first check-in and at each interval after, then given up once HOLD_LIMIT intervals passed.
    assert (waited.woke, states(engine)["pagination-docs"]) == ("failed", "failed")
    assert box.count("agent get") == held.HOLD_LIMIT + 2  # the first dispatch, then one try per check-in
    assert [(o.task, o.what) for o in waited.observations if o.task == "pagination-docs"] == [("pagination-docs", "failed")]
    assert [s.do for s in waited.next] == ["finish"]


def test_resume_leaves_an_effect_on_a_host_that_does_not_answer_in_flight_and_the_runs_end_names_it(tmp_path: Path) -> None:
    from orchestrator.effects import settle_in_flight, unsettled

    engine, _herdr, box = two_hosts(tmp_path)
    run = make_run(engine, ready=("pagination-docs",))
    box.agent("pagination-docs").on_prompt = lambda: setattr(box, "down", GONE)
    box.fail_next("agent prompt", error=GONE, after=True)
    dispatch(engine, run, ["pagination-docs"])
    effect = engine.ledger.find_effect(RUN_ID, dispatch_key("pagination-docs"))
    assert effect is not None

    # `orch resume` (and the door taking a run up) settles what it can: this one waits for its host, no exit 3.
    assert settle_in_flight(engine, run) == []
    assert engine.ledger.get_effect(effect.id).status is EffectStatus.INTENDED
    # Were the run to end with it (a worker no longer starting), it is the person's question, naming the host.
    assert unsettled(engine, run) == [
        f"agent_prompt for pagination-docs (effect {effect.id}) is in flight on host buildbox, which does not answer: {GONE.message} "
        f"-> once it answers, `orch resume {RUN_ID}` reads it back there"
    ]


# --- a worker already at work on a host that stops answering (lost) --------------------------------------------------

LOST_SINCE = "2026-11-30 08:00:00Z"
LOST_REASON = (
    f"host buildbox did not answer since {LOST_SINCE} ({GONE.message}); {{why}}, so its work was never brought home; "
    "its work is kept on buildbox (its checkout /srv/acme/widgets.worktrees/widgets-docs-pagination-guide and its commits there), "
    "nothing there touched"
)


def at_work_on_the_box(tmp_path: Path, controller: str = "agent") -> tuple[Engine, FakeHerdr, Run]:
    """pagination-docs working on the build box (its packet taken), the controller's two workers out of the way, the
    box's spool not listable (ssh exits 255, as for a host that is gone)."""
    engine, _herdr, box = two_hosts(tmp_path)
    make_run(engine, ready=("pagination-docs",))
    engine.ledger.update_run(RUN_ID, controller_kind=controller)
    for task in ("api-pagination", "api-tests"):
        engine.ledger.transition(RUN_ID, task, S.PROVISIONING, S.FAILED, cause={"test": True})
    engine.ledger.transition(RUN_ID, "pagination-docs", S.READY, S.DISPATCHED, cause={"test": True})
    engine.ledger.transition(RUN_ID, "pagination-docs", S.DISPATCHED, S.WORKING, cause={"test": True})
    engine.remote_runner = lambda argv, *, env, timeout: subprocess.CompletedProcess(argv, 255, "", "ssh: connect to host me@buildbox port 22: Connection refused")
    return engine, box, engine.ledger.get_run(RUN_ID)


def test_a_working_worker_whose_host_stops_answering_is_lost_until_it_answers_again(tmp_path: Path) -> None:
    from orchestrator.door import next_steps
    from orchestrator.observe import check_in

    engine, box, run = at_work_on_the_box(tmp_path)
    box.down = GONE

    notes, _waiting, _states = check_in(engine, run, 1)
    check_in(engine, run, 2)

    assert [(o.task, o.what) for o in notes] == [(None, "host_unreachable"), (None, "host_unreachable")]
    assert facts(engine) == [("host_held", "pagination-docs")]  # lost once, however many check-ins miss the box
    assert list(held.lost(engine.ledger, RUN_ID)) == ["pagination-docs"] and held.held(engine.ledger, RUN_ID) == {}
    assert states(engine)["pagination-docs"] == "working"  # no stall counted against it
    [step] = next_steps(engine, run)
    assert (step.do, step.why) == (
        "wait", f"pagination-docs at work on host buildbox, which does not answer: its work stays there, orch goes on once buildbox answers "
        f"(`orch finish --run {RUN_ID}` ends the run without it): orch checks in while it waits and returns when something needs you",
    )
    shown = render_status(build_status(engine.ledger, RUN_ID, engine.clock.now()), width=400)
    assert shown.split("\nhosts not answering:\n", 1)[1] == (
        f"  pagination-docs: lost: host buildbox did not answer a check-in ({GONE.message}); its work stays there, and orch reads it "
        "again once buildbox answers\n"
    )

    # The box answers again before the bound: its worker is read back as ever, and is no longer lost.
    box.down = None
    box.calls.clear()
    check_in(engine, run, 3)

    assert facts(engine) == [("host_held", "pagination-docs"), ("host_answered", "pagination-docs")]
    assert held.lost(engine.ledger, RUN_ID) == {} and states(engine)["pagination-docs"] == "working"
    assert box.commands()[:2] == ["agent list", "agent read"]  # read back on the box: its agent looked at again as ever


def test_a_lost_worker_is_given_up_after_the_held_workers_bound_its_host_named_and_its_work_kept_there(tmp_path: Path) -> None:
    from orchestrator.observe import check_in

    engine, box, run = at_work_on_the_box(tmp_path)
    box.down = GONE
    check_in(engine, run, 1)

    given = wait_out_the_bound(engine, run)

    reason = LOST_REASON.format(why="the run ended before it answered")
    assert [(s.task, s.what, s.text) for s in given] == [("pagination-docs", "given_up", f"failed: {reason}")]
    assert states(engine)["pagination-docs"] == "failed" and held.lost(engine.ledger, RUN_ID) == {}
    assert box.commands() == ["agent list"]  # nothing on the box was touched


def test_the_agent_controllers_wait_gives_a_lost_worker_up_after_the_bound_and_wakes(tmp_path: Path) -> None:
    from orchestrator.door import wait_run

    engine, box, run = at_work_on_the_box(tmp_path)
    box.down = GONE

    waited = wait_run(engine, run, timeout_s=600, poll_s=5, interval_s=60)

    assert (waited.woke, states(engine)["pagination-docs"]) == ("failed", "failed")
    [failed] = [o for o in waited.observations if o.task == "pagination-docs"]
    assert (failed.what, failed.text) == ("failed", f"failed: {LOST_REASON.format(why='the run ended before it answered')}")
    assert [s.do for s in waited.next] == ["finish"]


def test_orch_finish_ends_a_lost_worker_at_once_and_the_run_is_partial(tmp_path: Path) -> None:
    from orchestrator.door import finish_run
    from orchestrator.observe import check_in

    engine, box, run = at_work_on_the_box(tmp_path)
    box.down = GONE
    check_in(engine, run, 1)

    finished = finish_run(engine, engine.ledger.get_run(RUN_ID))

    worker = engine.ledger.get_worker(RUN_ID, "pagination-docs")
    assert worker.state is S.RETAINED  # retire could not reach the box: its pane and checkout stay there
    # FAIL, as the verdict's rule has it when no worker was accepted (beside an accepted one it is PARTIAL: the e2e).
    assert finished.report.verdict.value == "FAIL"
    reason = LOST_REASON.format(why="the run was finished before it answered")
    assert [e.detail["given_up"] for e in engine.ledger.events(RUN_ID) if e.kind == FactKind.HOST_ANSWERED] == [reason]


def test_orch_run_ends_a_lost_worker_after_the_bound_its_host_named(tmp_path: Path) -> None:
    import io

    from orchestrator import run as person
    from orchestrator.progress import Progress

    engine, box, run = at_work_on_the_box(tmp_path, controller="run")
    box.down = GONE
    said = io.StringIO()

    outcome = person.drive(engine, run, Progress(said, live=False), interval_s=60)

    clock = engine.clock
    assert isinstance(clock, FakeClock)
    # FAIL: no worker of this run was accepted (beside an accepted one it is PARTIAL: the e2e); never exit 3.
    assert (outcome.finished, outcome.report.verdict.value, outcome.exit_code) == (True, "FAIL", 11)
    assert engine.ledger.get_worker(RUN_ID, "pagination-docs").state is S.RETAINED
    reason = LOST_REASON.format(why="the run ended before it answered")
    refused = "ssh: connect to host me@buildbox port 22: Connection refused"
    rounds = [
        f"{at} run: host unreachable: host buildbox: cannot list its spool: {refused}\n"
        f"{at} run: host unreachable: host buildbox: {GONE.message}; its workers are checked again next round\n"
        for at in ("08:00:00", "08:01:00", "08:02:00", "08:03:00")
    ]
    assert said.getvalue() == (
        "08:00:00 api-pagination: failed\n08:00:00 api-tests: failed\n08:00:00 pagination-docs: working\n"
        + "".join(rounds)
        + f"08:03:00 host buildbox was not collected from before the run was judged (cannot list its spool: {refused}); messages its "
        "workers spooled after the last check-in are kept there\n"
        f"08:03:00 pagination-docs: given up: failed: {reason}\n"
        "08:03:00 retiring 1 worker: asking each agent to exit, then closing panes and removing worktrees\n"
        "08:03:00 pagination-docs: pane kept (1 of 1)\n08:03:00 retiring: removing the worktrees that hold no work\n"
        "08:03:00 api-pagination: retained\n08:03:00 api-tests: retained\n08:03:00 pagination-docs: retained\n"
    )
    # The bound, in check-in intervals: HOLD_LIMIT of them once nothing else moved, then the run ends.
    assert box.count("agent list") == held.HOLD_LIMIT + 1
