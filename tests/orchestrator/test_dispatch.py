"""Dispatch against a stateful fake herdr and a real ledger: one prompt per worker, acceptance, stalls, no re-sends."""

from __future__ import annotations

import hashlib
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_herdr import FakeHerdr

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.dispatch import classify_screen, dispatch, dispatch_key, render_dispatch
from orchestrator.engine import Engine
from orchestrator.errors import (
    ExitCode,
    HerdrAgentBlocked,
    HerdrProtocolError,
    HerdrTimeout,
    HerdrUnavailable,
)
from orchestrator.herdr_models import AgentInfo, AgentPrompted
from registry import EffectStatus, Run, WorkerState

ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "w1:p1-20261130T080000Z"
TASKS = ("api-pagination", "api-tests", "pagination-docs")
PANES = {task: f"w2:p{i + 1}" for i, task in enumerate(TASKS)}


def fleet(*reacts: str, overrides: dict[str, dict[str, Any]] | None = None, cls: type[FakeHerdr] = FakeHerdr) -> FakeHerdr:
    """herdr with one agent per reaction, in TASKS order, each in its pane of workspace w2 (the run's), at seq 10 and at
    its kind's input line (the example plan's pagination-docs is claude): dispatch reads it before pasting.
    ``overrides`` sets an agent's fields by task (its kind, status, completion_seq, interactive_ready)."""
    herdr = cls(cwd="/src/acme/widgets")
    assert herdr.workspace_create(cwd="/src/acme/widgets").root_pane.pane_id == PANES[TASKS[0]]
    for task, react in zip(TASKS, reacts, strict=False):
        if PANES[task] not in herdr.panes:
            herdr.pane_split(PANES[TASKS[0]], direction="down")
        fields: dict[str, Any] = {"seq": 10, "reacts": react, "ready": False, "completion": None, **(overrides or {}).get(task, {})}
        kind = fields.pop("kind", "claude" if task == "pagination-docs" else "codex")
        herdr.add_agent(PANES[task], task, kind, **fields)
        herdr.pane(PANES[task]).screen = "❯ \n" if kind == "claude" else "› \n"
    herdr.calls.clear()
    return herdr


def calls(herdr: FakeHerdr) -> list[tuple[str, ...]]:
    """herdr's calls as dispatch makes them: the command and target; a prompt says whether it waits, a read its source
    and line count."""
    shown: list[tuple[str, ...]] = []
    for argv in herdr.argvs():
        command, rest = " ".join(argv[:2]), argv[2:]
        if command == "agent prompt":
            shown.append(("agent prompt --wait" if "--wait" in rest else "agent prompt", rest[0]))
        elif command == "agent read":
            lines = rest[rest.index("--lines") + 1] if "--lines" in rest else "None"
            shown.append((command, rest[0], rest[rest.index("--source") + 1], lines))
        else:
            shown.append((command, *rest[:1]))
    return shown


def count(herdr: FakeHerdr, command: str) -> int:
    return [call[0] for call in calls(herdr)].count(command)


def make_engine(tmp_path: Path, herdr: FakeHerdr) -> Engine:
    settings = Settings(home=tmp_path / "home", orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=Path("/src"))
    return Engine(settings=settings, herdr=herdr, clock=FakeClock(), env={})


def ready_run(engine: Engine, tasks: tuple[str, ...] = TASKS) -> Run:
    """The example plan's run with the given workers provisioned (ready, with a pane) and the rest still provisioning."""
    run_dir = engine.run_dir(RUN_ID)
    run_dir.mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "plan.toml", run_dir / "plan.toml")
    run = engine.ledger.create_run(RUN_ID, controller_target="w1:p1", organization="acme", repo="widgets", repo_path="/src/acme/widgets",
                                   base_ref="origin/main", base_sha="1" * 40, plan_path="plan.toml")
    for index, planned in enumerate(engine.plan_for(run).workers):
        engine.ledger.add_worker(RUN_ID, planned.task, name=planned.name, kind=planned.kind, objective=planned.worker.objective,
                                 claimed_files=planned.worker.claim)
        if planned.task in tasks:
            engine.ledger.transition(RUN_ID, planned.task, WorkerState.PROVISIONING, WorkerState.READY, cause={"test": True},
                                     pane_id=f"w2:p{index + 1}", worktree_path=str(planned.worktree.path))
    return run


def look(name: str) -> tuple[str, ...]:
    """Dispatch's read of the screen right before pasting (dispatch.screen_problem)."""
    return ("agent read", name, "visible", "None")


def states(engine: Engine) -> dict[str, str]:
    return {w.task_label: str(w.state) for w in engine.ledger.list_workers(RUN_ID)}


def test_single_target_uses_prompt_wait_and_records_acceptance(tmp_path: Path) -> None:
    herdr = fleet("work")
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, ("api-pagination",))

    result = dispatch(engine, run, ["api-pagination"])

    assert render_dispatch(result) == (
        f"dispatch run {RUN_ID}: 1 accepted; 1 prompt(s) sent (one target, prompt --wait)\n"
        "\n"
        "task            agent           outcome    state    detail\n"
        "--------------  --------------  ---------  -------  ---------------------------------------------------------------\n"
        "api-pagination  api-pagination  accepted   working  accepted: working (seq 11, baseline 10) via agent prompt --wait\n"
    )
    assert calls(herdr) == [("agent get", "api-pagination"), look("api-pagination"), ("agent prompt --wait", "api-pagination")]
    packet = engine.run_dir(RUN_ID) / "packets" / "api-pagination.md"
    assert herdr.agent("api-pagination").prompts == [packet.read_text()]
    effect = engine.ledger.find_effect(RUN_ID, dispatch_key("api-pagination"))
    assert effect is not None and effect.status is EffectStatus.CONFIRMED
    assert effect.request == {"target": "api-pagination", "pane_id": "w2:p1", "baseline_seq": 10, "packet": str(packet),
                              "sha256": hashlib.sha256(packet.read_bytes()).hexdigest(), "bytes": len(packet.read_bytes())}
    transitions = [(e.from_state, e.to_state) for e in engine.ledger.events(RUN_ID, task_label="api-pagination") if e.kind == "transition"]
    assert transitions[-2:] == [(WorkerState.READY, WorkerState.DISPATCHED), (WorkerState.DISPATCHED, WorkerState.WORKING)]
    assert engine.ledger.get_worker(RUN_ID, "api-pagination").reply_target == "api-pagination"


def test_on_herdr_095_the_completion_seq_baseline_and_acceptance_are_recorded_in_the_ledger(tmp_path: Path) -> None:
    """herdr 0.9.2+ (../herdr-0.9.5/DELTA.md row 1): each packet's request keeps the agent's completion_seq before the
    send, and the acceptance the counter after it, so turn completion is later judged against that baseline
    (orchestrator.observe) instead of an idle/done flip."""
    herdr = fleet("work", "finish", overrides={TASKS[0]: {"completion": 5}, TASKS[1]: {"completion": 7}})
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, TASKS[:2])

    result = dispatch(engine, run, list(TASKS[:2]))

    assert [(w.task, w.outcome, w.detail) for w in result.workers] == [
        ("api-pagination", "accepted", "accepted: working (seq 11, baseline 10) via agent list"),
        ("api-tests", "accepted", "accepted: done (seq 12, baseline 10) via agent list")]
    baselines = [engine.ledger.find_effect(RUN_ID, dispatch_key(t)).request["baseline_completion_seq"] for t in TASKS[:2]]  # type: ignore[union-attr]
    accepted = [e.detail["cause"]["acceptance"] for t in TASKS[:2] for e in engine.ledger.events(RUN_ID, task_label=t) if e.kind == "transition" and e.to_state is WorkerState.WORKING]
    assert (baselines, [(a["completion_seq"], a["baseline_completion_seq"]) for a in accepted]) == ([5, 7], [(5, 5), (8, 7)])


def test_095_row10_a_codex_herdr_calls_unknown_but_interactive_ready_is_sent_its_packet(tmp_path: Path) -> None:
    """herdr 0.9.3+ calls an idle codex whose screen no rule matches `unknown`, and takes it as ready once it is
    interactive-ready (../herdr-0.9.5/DELTA.md row 10): dispatch sends it its packet. Any other unknown agent, or a
    codex not interactive-ready, is still not sent one."""
    herdr = fleet("work", "work", "work", overrides={TASKS[0]: {"status": "unknown", "ready": True},
                                                     TASKS[1]: {"status": "unknown", "ready": True, "kind": "claude"},
                                                     TASKS[2]: {"status": "unknown", "kind": "codex"}})
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine)

    result = dispatch(engine, run)

    assert [(w.task, w.outcome, w.detail) for w in result.workers] == [
        ("api-pagination", "accepted", "accepted: working (seq 11, baseline 10) via agent prompt --wait"),
        ("api-tests", "skipped", "agent api-tests is unknown; a packet goes only to an idle or done agent"),
        ("pagination-docs", "skipped", "agent pagination-docs is unknown; a packet goes only to an idle or done agent")]


def test_fleet_sends_without_wait_and_confirms_with_one_shared_list(tmp_path: Path) -> None:
    herdr = fleet("work", "finish", "stall")
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine)

    result = dispatch(engine, run)

    assert [(w.task, w.outcome, w.state) for w in result.workers] == [
        ("api-pagination", "accepted", "working"), ("api-tests", "accepted", "working"), ("pagination-docs", "stalled", "dispatched")]
    assert (result.path, result.prompts_sent) == ("fleet", 3)
    assert (count(herdr, "agent prompt"), count(herdr, "agent prompt --wait"), count(herdr, "agent list")) == (3, 0, 1)
    # Only the laggard is waited on, then read once; nothing is sent twice.
    assert calls(herdr)[-3:] == [("agent wait", "pagination-docs"), ("agent get", "pagination-docs"),
                                ("agent read", "pagination-docs", "recent-unwrapped", "60")]
    stalled = result.workers[2]
    assert stalled.diagnosis is not None and stalled.diagnosis.suggests == "agent_prompt"
    assert stalled.detail == ("submitted, not accepted (no state change within 5000 ms); not re-sent; "
                              "the agent sits at its input prompt and reported no state change")
    assert [e.kind for e in engine.ledger.events(RUN_ID, task_label="pagination-docs")][-1] == "dispatch_diagnosis"
    assert not result.ok


def test_rerun_sends_nothing_new_and_picks_up_late_acceptance(tmp_path: Path) -> None:
    herdr = fleet("work", "work", "stall")
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine)
    dispatch(engine, run)
    herdr.agent("pagination-docs").status, herdr.agent("pagination-docs").seq = "working", 11
    herdr.calls.clear()

    again = dispatch(engine, run)

    assert [(w.task, w.outcome, w.state, w.detail) for w in again.workers] == [
        ("api-pagination", "skipped", "working", "already working: its packet was sent before"),
        ("api-tests", "skipped", "working", "already working: its packet was sent before"),
        ("pagination-docs", "accepted", "working", "accepted: working (seq 11, baseline 10) via agent list"),
    ]
    assert (again.prompts_sent, calls(herdr)) == (0, [("agent list",)])
    assert [len(herdr.agent(t).prompts) for t in TASKS] == [1, 1, 1]


def test_single_stall_is_diagnosed_from_one_read_without_a_second_prompt(tmp_path: Path) -> None:
    herdr = fleet("stall")
    herdr.agent("api-pagination").after_prompt = "Allow codex to run `pytest`?\n  1. Yes  2. No\n"
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, ("api-pagination",))

    result = dispatch(engine, run, ["api-pagination"])

    assert calls(herdr) == [("agent get", "api-pagination"), look("api-pagination"), ("agent prompt --wait", "api-pagination"),
                           ("agent read", "api-pagination", "recent-unwrapped", "60")]
    assert render_dispatch(result).splitlines()[-3:] == [
        "api-pagination: last lines of its pane (approval_prompt):", "  | Allow codex to run `pytest`?", "  |   1. Yes  2. No"]
    assert states(engine)["api-pagination"] == "dispatched"
    assert dispatch(engine, run, ["api-pagination"]).prompts_sent == 0
    assert count(herdr, "agent prompt --wait") + count(herdr, "agent prompt") == 1


def test_working_agent_is_not_sent_a_packet(tmp_path: Path) -> None:
    herdr = fleet("work")
    herdr.agent("api-pagination").status = "working"
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, ("api-pagination",))

    result = dispatch(engine, run, ["api-pagination"])

    assert [(w.outcome, w.state, w.detail) for w in result.workers] == [
        ("skipped", "ready", "agent api-pagination is working; a packet goes only to an idle or done agent")]
    assert calls(herdr) == [("agent get", "api-pagination")]


def test_missing_agent_fails_that_worker_and_dispatches_the_others(tmp_path: Path) -> None:
    herdr = fleet("work", "work")
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, ("api-pagination", "api-tests", "pagination-docs"))

    result = dispatch(engine, run)

    assert [(w.task, w.outcome, w.state) for w in result.workers] == [
        ("api-pagination", "accepted", "working"), ("api-tests", "accepted", "working"), ("pagination-docs", "failed", "failed")]
    assert result.workers[2].detail == "herdr agent get: agent_not_found: agent target pagination-docs not found"


def test_unknown_prompt_outcome_stays_in_flight_and_is_never_repeated(tmp_path: Path) -> None:
    herdr = fleet("stall")
    herdr.fail_next("agent prompt", error=HerdrTimeout("herdr agent prompt: no answer within 75 s (killed)"))
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, ("api-pagination",))

    first = dispatch(engine, run, ["api-pagination"])
    second = dispatch(engine, run, ["api-pagination"])

    assert [(w.outcome, w.state, w.detail) for w in first.workers] == [(
        "unknown", "ready",
        "agent_prompt for api-pagination (effect 1) got no answer from herdr (HerdrTimeout) and read-back cannot tell whether it happened: "
        "the packet to api-pagination ended without an answer (HerdrTimeout) and api-pagination (idle) shows no sign of it: did it arrive? "
        "Read its pane (`herdr agent read api-pagination`); not re-sent",
    )]
    assert first.prompts_sent == 1 and second.prompts_sent == 0
    assert [(w.outcome, w.state) for w in second.workers] == [("unknown", "ready")]
    # One prompt; every later look is a read-back of state and screen (four right after the timeout, a pause apart,
    # then one on the second dispatch).
    seen = [("agent get", "api-pagination"), ("agent read", "api-pagination", "recent", "400")]
    assert calls(herdr) == [("agent get", "api-pagination"), look("api-pagination"), ("agent prompt --wait", "api-pagination"), *seen * 4, *seen]
    effect = engine.ledger.find_effect(RUN_ID, dispatch_key("api-pagination"))
    assert effect is not None and effect.status is EffectStatus.INTENDED


def test_unknown_prompt_outcome_settled_at_once_when_the_agent_moved(tmp_path: Path) -> None:
    herdr = fleet("work")
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, ("api-pagination",))
    agent = herdr.agent("api-pagination")
    # herdr took the prompt (the agent works on it), but its answer came back garbled.
    herdr.fail_next("agent prompt", error=HerdrProtocolError("herdr agent prompt: unreadable answer: '{\"id\"'"), after=True)
    result = dispatch(engine, run, ["api-pagination"])

    assert [(w.outcome, w.state, w.detail) for w in result.workers] == [("accepted", "working", "accepted: working (seq 11, baseline 10) via agent get")]
    assert len(agent.prompts) == 1
    effect = engine.ledger.find_effect(RUN_ID, dispatch_key("api-pagination"))
    assert effect is not None and effect.status is EffectStatus.CONFIRMED and effect.response is not None
    assert effect.response["via"] == "agent get"


def test_in_flight_prompt_is_settled_by_read_back_not_resent(tmp_path: Path) -> None:
    herdr = fleet("work")
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, ("api-pagination",))
    # An earlier process intended the prompt and died; herdr shows the agent moved past the baseline.
    engine.ledger.intend(RUN_ID, "api-pagination", "agent_prompt", dispatch_key("api-pagination"),
                         {"target": "api-pagination", "pane_id": "w2:p1", "baseline_seq": 10})
    herdr.agent("api-pagination").status, herdr.agent("api-pagination").seq = "working", 12

    result = dispatch(engine, run, ["api-pagination"])

    assert [(w.outcome, w.state) for w in result.workers] == [("accepted", "working")]
    assert calls(herdr) == [("agent get", "api-pagination")]


def test_unknown_task_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    herdr = fleet("work")
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine)

    with pytest.raises(Exception) as caught:
        dispatch(engine, run, ["nope"])

    assert str(caught.value) == f"run {RUN_ID} has no worker nope"
    assert calls(herdr) == []


@pytest.mark.parametrize(
    ("screen", "suggests"),
    [
        ("", "nothing"),
        ("codex exited\n$ \n", "shell_prompt"),
        ("Do you trust the files in this folder? (y/n)\n", "approval_prompt"),
        ("› \n", "agent_prompt"),
        ("thinking about it\n", "unrecognised"),
    ],
)
def test_classify_screen(screen: str, suggests: str) -> None:
    assert classify_screen(screen).suggests == suggests


class OverlapHerdr(FakeHerdr):
    """Proves overlap without timing: the first two resolves (and the first two prompts) each wait for a second
    caller at a barrier, which a one-at-a-time dispatch never reaches (the barrier breaks after 10 s)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.lock = threading.Lock()
        self.barriers = {"agent get": threading.Barrier(2, timeout=10), "agent prompt": threading.Barrier(2, timeout=10)}
        self.seen = {"agent get": 0, "agent prompt": 0}
        self.running = self.most = 0

    def _overlap(self, command: str, call: Any) -> Any:
        with self.lock:
            self.seen[command] += 1
            first_two = self.seen[command] <= 2
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            if first_two:
                self.barriers[command].wait()
            return call()
        finally:
            with self.lock:
                self.running -= 1

    def agent_get(self, target: str) -> AgentInfo:
        return self._overlap("agent get", lambda: FakeHerdr.agent_get(self, target))  # type: ignore[no-any-return]

    def agent_prompt(self, target: str, text: str, *, wait: bool = False, until: Any = (), timeout_ms: int | None = None) -> AgentPrompted:
        return self._overlap("agent prompt", lambda: FakeHerdr.agent_prompt(self, target, text, wait=wait, until=until, timeout_ms=timeout_ms))  # type: ignore[no-any-return]


def test_fleet_resolves_and_sends_concurrently_up_to_the_cap_each_prompt_once(tmp_path: Path) -> None:
    herdr = fleet("work", "work", "work", cls=OverlapHerdr)
    assert isinstance(herdr, OverlapHerdr)
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine)

    result = dispatch(engine, run)

    assert [(w.task, w.outcome, w.state) for w in result.workers] == [
        ("api-pagination", "accepted", "working"), ("api-tests", "accepted", "working"), ("pagination-docs", "accepted", "working")]
    assert (result.path, result.prompts_sent) == ("fleet", 3)
    assert herdr.most == 2  # the example plan's cap (concurrency = 2)
    assert [len(herdr.agent(t).prompts) for t in TASKS] == [1, 1, 1]
    assert (count(herdr, "agent get"), count(herdr, "agent prompt"), count(herdr, "agent list")) == (3, 3, 1)


def test_an_agent_wait_that_overruns_its_timeout_does_not_abort_the_fleets_acceptance(tmp_path: Path) -> None:
    """herdr's `agent wait` can overrun its own timeout (herdr#4280): our wall clock kills it, one read decides."""
    herdr = fleet("work", "stall", "stall")
    herdr.fail_next("agent wait", error=HerdrTimeout("herdr agent wait: no answer within 20s; killed"), word="api-tests")
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine)
    herdr.agent("pagination-docs").reacts = "work"

    result = dispatch(engine, run)

    assert [(w.task, w.outcome) for w in result.workers] == [("api-pagination", "accepted"), ("api-tests", "stalled"), ("pagination-docs", "accepted")]
    assert ("agent get", "api-tests") in calls(herdr)


def test_a_prompt_refused_at_a_dialog_is_reported_blocked_with_the_screen(tmp_path: Path) -> None:
    herdr = fleet("work")
    herdr.pane(PANES["api-pagination"]).after_read = "Allow the command `rm -rf build`?\n  1. Yes\n  2. No\n"
    herdr.fail_next("agent prompt", error=HerdrAgentBlocked(
        "herdr agent prompt: not sent: the agent is at a dialog (agent_blocked: agent api-pagination is blocked and requires interactive input)",
        code="agent_blocked"))
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, ("api-pagination",))

    result = dispatch(engine, run, ["api-pagination"])

    worker = result.workers[0]
    assert (worker.outcome, worker.state, worker.detail) == (
        "blocked", "ready",
        "herdr agent prompt: not sent: the agent is at a dialog (agent_blocked: agent api-pagination is blocked and requires interactive input); "
        "answer it in the pane, then dispatch again",
    )
    assert worker.diagnosis is not None and worker.diagnosis.last_lines == ("Allow the command `rm -rf build`?", "  1. Yes", "  2. No")
    assert not result.ok
    effect = engine.ledger.find_effect(RUN_ID, dispatch_key("api-pagination"))
    assert effect is not None and effect.status is EffectStatus.FAILED  # nothing was written: a later dispatch may send it


def test_herdr_down_stops_the_dispatch_instead_of_skipping_each_worker(tmp_path: Path) -> None:
    herdr = fleet("work", "work")
    for _ in range(2):
        herdr.fail_next("agent prompt", error=HerdrUnavailable(
            "herdr agent prompt: herdr server is not running (server_not_running: no herdr server is running at /s)", code="server_not_running"))
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, ("api-pagination", "api-tests"))

    with pytest.raises(HerdrUnavailable) as raised:
        dispatch(engine, run)
    assert raised.value.exit_code == ExitCode.HERDR_UNAVAILABLE


@pytest.mark.parametrize("verified", [False, True])
def test_095_row7_the_plans_policy_alone_turns_trust_repository_on(tmp_path: Path, verified: bool) -> None:
    """`[policy] trust_repository = true` in the run's plan is the only way --trust-repository goes on herdr's worktree
    commands: Engine.plan_for hands it to the boundary (orchestrator/herdr.py decides per server release)."""
    from orchestrator.herdr import HerdrCli

    herdr = HerdrCli("herdr", runner=lambda *a, **k: None)  # type: ignore[arg-type,return-value]  # never run here
    settings = Settings(home=tmp_path / "home", orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=Path("/src"))
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock(), env={})
    run = ready_run(engine)
    if verified:
        snapshot = engine.run_dir(RUN_ID) / "plan.toml"
        text = snapshot.read_text()
        snapshot.write_text(text.replace("[[workers]]", "[policy]\ntrust_repository = true\n\n[[workers]]", 1))
    engine.plan_for(run)
    assert herdr.trust_repository is verified


# Screens written down from the real agents' captures (../shared/real-agents: codex-19, claude-8, opencode-1).
CODEX_TRUST = ("\n  Folder access\n  /src/acme/widgets\n\n  Trust this folder? Codex can read, edit, and run files here.\n\n"
               "› 1. Trust and continue\n  2. Back to Agent Command Center\n\n  enter continue · esc back\n")
CLAUDE_NOTICE = ("● Bash(echo hello > proof.txt)\n  ⎿  Waiting…\n\n" + "─" * 40 + "\n  We're changing auto mode.\n\n"
                 "  Enter to continue · Esc to cancel\n")


@pytest.mark.parametrize(("task", "screen", "detail"), [
    ("api-pagination", CODEX_TRUST,
     "its screen shows the codex trust folder, which a packet's Enter would answer; not sent. Screen: Folder access / /src/acme/widgets / "
     "Trust this folder? Codex can read, edit, and run files here. / › 1. Trust and continue / 2. Back to Agent Command Center / enter continue · esc back"),
    ("pagination-docs", CLAUDE_NOTICE,
     "its screen shows the claude notice, which a packet's Enter would answer; not sent. Screen: ● Bash(echo hello > proof.txt) / ⎿ Waiting… / "
     "We're changing auto mode. / Enter to continue · Esc to cancel"),
    ("pagination-docs", "\n\n", "its screen does not show that it takes a prompt (claude prompt box); not sent. Screen: (blank)"),
])  # fmt: skip
def test_a_dialog_herdr_reads_idle_or_a_screen_not_yet_ready_gets_no_packet(tmp_path: Path, task: str, screen: str, detail: str) -> None:
    """herdr says idle (its manifests do not know codex 0.169's trust dialog or Claude's notices; a blank start screen
    falls back to idle), but dispatch reads the screen before pasting: a packet's Enter never answers a dialog."""
    herdr = fleet("work", "work", "work")
    herdr.pane(PANES[task]).screen = screen
    engine = make_engine(tmp_path, herdr)
    run = ready_run(engine, (task,))

    result = dispatch(engine, run, [task])

    assert [(w.outcome, w.state, w.detail) for w in result.workers] == [("skipped", "ready", detail)]
    assert herdr.agent(task).prompts == [] and count(herdr, "agent prompt") + count(herdr, "agent prompt --wait") == 0
