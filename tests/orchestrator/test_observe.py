"""Observation rounds in-process: a real ledger, a fake clock and the shared fake herdr (the only seam)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fake_herdr import FakeAgent, FakeHerdr

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.errors import HerdrError, HerdrTimeout, HostUnreachable
from orchestrator.herdr_models import AgentExplain, AgentStatus
from orchestrator import messages
from orchestrator.intake import Intake, add_message
from orchestrator.dialogs import approve
from orchestrator.door import finish_run, hand_over, next_steps, render_waited, settled_check_in, wait_run
from orchestrator.errors import OrchError
from orchestrator.observe import Observation, answers_owed, check_in, liveness_token, match_answer, observe, render_observe
from orchestrator.plan import Answer
from orchestrator.repeats import REPEAT_REQUEST
from orchestrator.report import build_report, render_report
from orchestrator.status import build_status, render_status
from registry import InboxVerdict, Run, WorkerState

S = WorkerState
RUN = "w1:p1-20261130T080000Z"
PLAN = """organization = "acme"
repo = "widgets"
base = "origin/main"

[[workers]]
task = "feature-a"
objective = "Do A."
deliverable = "Commits."
branch = "feat/a"
claim = ["src/a/**"]

[[workers.answers]]
when = "formal"
answer = "Yes, formal."

[[workers]]
task = "feature-b"
objective = "Do B."
deliverable = "Commits."
branch = "feat/b"
claim = ["src/b/**"]
"""


PA, PB = "w1:p2", "w1:p3"  # feature-a's and feature-b's panes, as the shared fake herdr mints them
NO_HOOK = AgentExplain(state="unknown", fallback_reason="no integration hook reported")


@pytest.fixture
def herdr(tmp_path: Path) -> FakeHerdr:
    """The shared fake herdr (0.8.2: no completion_seq) with both workers' codex agents working in tabs of their own."""
    herdr = FakeHerdr(cwd=tmp_path, version="0.8.2")
    for task in ("feature-a", "feature-b"):
        pane = herdr.tab_create(workspace="w1").root_pane.pane_id
        herdr.add_agent(pane, task, "codex", status="working", explain=NO_HOOK)
        herdr.pane(pane).screen = ""
    assert [p for p in herdr.panes if p != "w1:p1"] == [PA, PB]
    herdr.calls.clear()
    return herdr


def agent_at(herdr: FakeHerdr, pane: str) -> FakeAgent:
    found = herdr.pane(pane).agent
    assert found is not None
    return found


def status(herdr: FakeHerdr, pane: str, value: AgentStatus, seq: int | None = None) -> None:
    """What herdr now reports for the agent in ``pane`` (its seq moves only when given: the test says when output changed)."""
    agent = agent_at(herdr, pane)
    agent.status = value
    if seq is not None:
        agent.seq = seq


def keys(herdr: FakeHerdr) -> list[tuple[str, tuple[str, ...]]]:
    """Keys sent to panes, in order: (pane, keys)."""
    return [(argv[2], tuple(argv[3:])) for argv in herdr.argvs() if argv[:2] == ("pane", "send-keys")]


def spinner(title: str) -> AgentExplain:
    """`agent explain` of an agent herdr calls idle whose title still spins (the screen shows work)."""
    return AgentExplain(
        state="working", visible_working=True, matched_rule={"id": "title_spinner", "priority": 1100, "region": "osc_title", "state": "working"},
        evaluated_rules=({"id": "title_spinner", "evidence": {"region_preview": title}},),
    )  # fmt: skip


def fail_prompt(herdr: FakeHerdr, error: HerdrError, landed: bool) -> None:
    """The next prompt fails with ``error``; ``landed``: herdr typed it and the agent took its turn, but orch never heard back."""
    herdr.fail_next("agent prompt", error=error, after=landed)


@pytest.fixture
def engine(tmp_path: Path, herdr: FakeHerdr) -> Engine:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock())
    engine.ledger.create_run("w1:p1-20261129T080000Z", controller_target="w1:p1")
    engine.ledger.create_run(RUN, controller_target="w1:p1")
    for task, pane in (("feature-a", PA), ("feature-b", PB)):
        engine.ledger.add_worker(RUN, task, name=task, kind="codex", objective="x", pane_id=pane, reply_target=pane)
        engine.ledger.transition(RUN, task, S.PROVISIONING, S.READY)
        engine.ledger.transition(RUN, task, S.READY, S.DISPATCHED)
        engine.ledger.transition(RUN, task, S.DISPATCHED, S.WORKING)
    engine.run_dir(RUN).mkdir(parents=True)
    (engine.run_dir(RUN) / "plan.toml").write_text(PLAN)
    yield engine
    engine.close()


def run_of(engine: Engine) -> Run:
    return engine.ledger.get_run(RUN)


def envelope(task: str, kind: str, body: str, *, run: str = RUN, sender: str | None = None, reply_to: str | None = None) -> str:
    pane = {"feature-a": PA, "feature-b": PB}.get(task, "w1:px")
    return f"[herdr-orchestration run={run} task={task} from={sender or task} kind={kind} reply-to={reply_to or pane}]\n{body}"


def state(engine: Engine, task: str) -> WorkerState:
    return engine.ledger.get_worker(RUN, task).state


def test_match_answer_substring_and_regex() -> None:
    answers = (Answer(when="page size", answer="50"), Answer(when=r"formal|polite", regex=True, answer="Formal."))
    assert match_answer(answers, "Which PAGE SIZE?") == answers[0]
    assert match_answer(answers, "Should it be polite?") == answers[1]
    assert match_answer(answers, "Tabs or spaces?") is None


def test_liveness_token_moves_with_state_or_output() -> None:
    assert liveness_token(3, "a") == liveness_token(3, "a")
    assert len({liveness_token(3, "a"), liveness_token(4, "a"), liveness_token(3, "b")}) == 3


def test_fails_on_exactly_the_third_unchanged_check_in(engine: Engine, herdr: FakeHerdr) -> None:
    status(herdr, PB, "idle")  # feature-b would be asked for a result; keep it out of the way
    engine.ledger.transition(RUN, "feature-b", S.WORKING, S.FAILED)
    for expected in (S.WORKING, S.WORKING, S.WORKING):  # baseline, 1st and 2nd unchanged
        observe(engine, run_of(engine), once=True)
        assert state(engine, "feature-a") is expected
    herdr.pane(PA).screen = "• Running pytest"  # any change resets the count
    for _ in range(3):
        observe(engine, run_of(engine), once=True)
        assert state(engine, "feature-a") is S.WORKING
    result = observe(engine, run_of(engine), once=True)
    assert state(engine, "feature-a") is S.FAILED
    assert result.observations == (
        Observation(round=1, task="feature-a", what="failed", text="no change of state or output across 3 consecutive check-ins"),
    )


def test_observe_loops_on_the_injected_clock_until_nothing_is_active(engine: Engine, herdr: FakeHerdr) -> None:
    engine.ledger.transition(RUN, "feature-b", S.WORKING, S.FAILED)
    result = observe(engine, run_of(engine), interval=5)
    assert (result.rounds, result.active, state(engine, "feature-a")) == (4, False, S.FAILED)
    assert engine.clock.slept == [5, 5, 5]  # type: ignore[attr-defined]


def test_question_answered_from_the_plan_once_the_worker_settles(engine: Engine, herdr: FakeHerdr) -> None:
    add_message(engine, run_of(engine), envelope("feature-a", "question", "Should the greeting be formal?"))
    assert state(engine, "feature-a") is S.QUESTION
    first = observe(engine, run_of(engine), once=True)  # still working: the answer waits
    assert (herdr.prompted, first.observations) == ([], ())
    status(herdr, PA, "idle")
    second = observe(engine, run_of(engine), once=True)
    assert herdr.prompted == [(
        PA,
        f"[herdr-orchestration run={RUN} task=feature-a from=w1:p1 kind=answer reply-to=w1:p1]\nYes, formal.",
    )]  # fmt: skip
    assert [o.what for o in second.observations] == ["answered"]
    assert (state(engine, "feature-a"), engine.ledger.get_worker(RUN, "feature-a").pending_question) == (S.WORKING, None)
    observe(engine, run_of(engine), once=True)
    assert len(herdr.prompted) == 1  # handled once, never re-sent


def test_unanswerable_question_and_blocked_are_surfaced_and_kept(engine: Engine, herdr: FakeHerdr) -> None:
    add_message(engine, run_of(engine), envelope("feature-b", "question", "Tabs or spaces?"))
    add_message(engine, run_of(engine), envelope("feature-a", "blocked", "Need a token for the staging API."))
    status(herdr, PA, "blocked")
    status(herdr, PB, "idle")
    result = observe(engine, run_of(engine), once=True)
    assert render_observe(result) == (
        f"Run {RUN}: 1 check-in round\n"
        "  [1] feature-b needs answer #1: Tabs or spaces?\n"
        "  [1] feature-a blocked #2: Need a token for the staging API.\n"
        "Workers:\n"
        "  feature-a (feature-a): blocked, herdr blocked, unchanged check-ins 0\n"
        "  feature-b (feature-b): question, herdr idle, unchanged check-ins 0\n"
        "Still active: no\n"
    )
    assert herdr.prompted == []
    for _ in range(4):  # waiting on the person is never a stall
        observe(engine, run_of(engine), once=True)
    assert (state(engine, "feature-a"), state(engine, "feature-b")) == (S.BLOCKED, S.QUESTION)


def test_result_recorded_with_its_parsed_checks(engine: Engine, herdr: FakeHerdr, tmp_path: Path) -> None:
    body = "Status: done\nCommits: none\nChanged files: src/a/x.py\nChecks:\n- pytest -q => exit 0\n  | 3 passed\nResidual risk: none"
    added = add_message(engine, run_of(engine), envelope("feature-a", "result", body))
    assert (added.state_before, added.state_after) == (S.WORKING, S.RESULT)
    status(herdr, PA, "idle")
    result = observe(engine, run_of(engine), once=True)
    assert [(o.task, o.what, o.text) for o in result.observations if o.task == "feature-a"] == [
        ("feature-a", "result", "status done, 0 commit(s), 1 changed file(s), 1 check(s)")
    ]
    worker = engine.ledger.get_worker(RUN, "feature-a")
    assert worker.reported_checks is not None and '"command":"pytest -q"' in worker.reported_checks


def test_settled_worker_without_result_is_asked_once_then_surfaced(engine: Engine, herdr: FakeHerdr) -> None:
    status(herdr, PB, "done")
    engine.ledger.transition(RUN, "feature-a", S.WORKING, S.FAILED)
    first = observe(engine, run_of(engine), once=True)
    # Seen settled once: its result may still be on its way to the inbox, so nothing is asked yet.
    assert ([o.what for o in first.observations], herdr.prompted) == ([], [])
    second = observe(engine, run_of(engine), once=True)
    assert [o.what for o in second.observations] == ["asked_for_result"]
    assert len(herdr.prompted) == 1 and "kind=follow-up" in herdr.prompted[0][1]
    status(herdr, PB, "idle")
    agent_at(herdr, PB).seq = 2
    assert observe(engine, run_of(engine), once=True).observations == ()
    fourth = observe(engine, run_of(engine), once=True)
    assert [(o.what, o.text) for o in fourth.observations] == [("settled_without_result", "idle without a result after being asked for it")]
    assert len(herdr.prompted) == 1


@pytest.mark.parametrize("herdr_095", [True, False], ids=["0.9.5", "before-0.9.2"])
def test_a_done_flip_with_an_unchanged_completion_seq_is_no_finished_turn(engine: Engine, herdr: FakeHerdr, herdr_095: bool) -> None:
    """herdr 0.9.2+ counts finished turns (../herdr-0.9.5/DELTA.md row 1): a worker whose packet was sent at
    completion_seq 3 and that herdr now calls `done` with the counter still at 3 has not finished that turn (a leftover
    done, or an idle<->done flip), so it is not asked for its result; once the counter moves it is. Without the
    counter (before 0.9.2) today's evidence decides: settled across two check-ins."""
    engine.ledger.transition(RUN, "feature-a", S.WORKING, S.FAILED)
    effect = engine.ledger.intend(RUN, "feature-b", "agent_prompt", "feature-b:dispatch:1",
                                  {"target": "feature-b", "pane_id": PB, "baseline_seq": 1, **({"baseline_completion_seq": 3} if herdr_095 else {})})
    engine.ledger.confirm(effect, {"submitted": "yes", "accepted": True})
    status(herdr, PB, "done")
    if herdr_095:
        agent_at(herdr, PB).completion = 3
    first, second = (observe(engine, run_of(engine), once=True) for _ in range(2))
    flip = "herdr says done, but its completion_seq is still 3 (no turn finished since the last prompt); not asking for the result yet"
    if herdr_095:
        assert [[(o.what, o.text) for o in r.observations] for r in (first, second)] == [[("turn_not_finished", flip)]] * 2
        assert herdr.prompted == []
        agent_at(herdr, PB).completion = 4  # the turn finished: the counter moved
        agent_at(herdr, PB).seq = 2
        third, fourth = (observe(engine, run_of(engine), once=True) for _ in range(2))
        assert ([o.what for o in third.observations], [o.what for o in fourth.observations]) == ([], ["asked_for_result"])
    else:
        assert ([o.what for o in first.observations], [o.what for o in second.observations]) == ([], ["asked_for_result"])
    assert len(herdr.prompted) == 1 and "kind=follow-up" in herdr.prompted[0][1]


def test_worker_that_ignores_the_request_for_its_result_fails_with_that_evidence(engine: Engine, herdr: FakeHerdr) -> None:
    engine.ledger.transition(RUN, "feature-a", S.WORKING, S.FAILED)
    status(herdr, PB, "idle")
    observe(engine, run_of(engine), once=True)  # seen settled
    observe(engine, run_of(engine), once=True)  # still settled: asked once; the fake agent turns working
    status(herdr, PB, "idle")
    agent_at(herdr, PB).seq = 2  # its follow-up turn ended, again without a result
    for unchanged in (0, 1, 2):
        observe(engine, run_of(engine), once=True)
        assert (state(engine, "feature-b"), engine.ledger.get_worker(RUN, "feature-b").unchanged_check_ins) == (S.WORKING, unchanged)
    result = observe(engine, run_of(engine), once=True)
    assert [(o.what, o.text) for o in result.observations] == [
        ("settled_without_result", "idle without a result after being asked for it"),
        ("failed", "idle without a result after being asked for it once; no change of state or output across 3 consecutive check-ins"),
    ]
    assert state(engine, "feature-b") is S.FAILED and len(herdr.prompted) == 1


def test_stale_and_forged_messages_change_no_worker(engine: Engine, herdr: FakeHerdr) -> None:
    before = {w.task_label: w for w in engine.ledger.list_workers(RUN)}
    for raw in (
        envelope("feature-a", "result", "Status: done", run="w1:p1-20261129T080000Z"),
        envelope("feature-a", "result", "Status: done", run="r-other"),
        envelope("feature-a", "result", "Status: done", sender="mallory"),
        envelope("feature-a", "question", "?", reply_to="w1:p9"),
        envelope("feature-x", "update", "hi"),
        envelope("feature-a", "answer", "self-answer"),
        "Status: done",
    ):
        add_message(engine, run_of(engine), raw)
    assert {w.task_label: w for w in engine.ledger.list_workers(RUN)} == before
    result = observe(engine, run_of(engine), once=True)
    assert [(o.what, o.text.split(":")[0]) for o in result.observations] == [
        ("kept_aside", "stale_run"), ("kept_aside", "unknown_run"), ("kept_aside", "wrong_sender"),
        ("kept_aside", "wrong_reply_to"), ("kept_aside", "unknown_task"), ("kept_aside", "wrong_direction"),
        ("kept_aside", "malformed_header"),
    ]  # fmt: skip


def test_unknown_state_that_explain_cannot_repair_fails_the_worker(engine: Engine, herdr: FakeHerdr) -> None:
    status(herdr, PA, "unknown")
    result = observe(engine, run_of(engine), once=True)
    assert state(engine, "feature-a") is S.FAILED
    assert [(o.task, o.what, o.text) for o in result.observations] == [
        ("feature-a", "failed", "state unknown and `agent explain` cannot repair it: no integration hook reported")
    ]


def test_unknown_state_repaired_by_explain_is_not_a_failure(engine: Engine, herdr: FakeHerdr) -> None:
    status(herdr, PA, "unknown")
    agent_at(herdr, PA).explain = AgentExplain(state="working")
    observe(engine, run_of(engine), once=True)
    assert state(engine, "feature-a") is S.WORKING


def _hangs(what: str) -> HerdrTimeout:
    return HerdrTimeout(f"herdr {what}: no answer within 30s; killed")


@pytest.mark.parametrize("call", ["agent_list", "agent_get", "agent_explain", "agent_read", "pane_read"])
def test_a_hung_herdr_at_any_call_of_a_check_in_is_no_news_about_any_worker_it_stops_the_check_in(
    engine: Engine, herdr: FakeHerdr, monkeypatch: pytest.MonkeyPatch, call: str,
) -> None:
    # Issue 21: a check-in's call that ran to its time limit (herdr hung) was taken as news about a worker (`agent
    # explain`'s silence failed it for good, an unread screen counted as output) or as a round without news, so a hung
    # herdr was checked in on forever. It is an outage: it reaches `orch run`, which stops the run interrupted.
    status(herdr, PA, {"agent_explain": "unknown", "pane_read": "blocked"}.get(call, "working"))
    if call == "agent_get":  # a worker `agent list` does not show is looked up by itself
        listed = (herdr.agent_get(PB),)
        monkeypatch.setattr(herdr, "agent_list", lambda: listed)

    def hung(*args: object, **kwargs: object) -> object:
        raise _hangs(call.replace("_", " "))

    monkeypatch.setattr(herdr, call, hung)
    before = [(w.task_label, w.state) for w in engine.ledger.list_workers(RUN)]

    with pytest.raises(HerdrTimeout):
        check_in(engine, run_of(engine), 1)

    assert [(w.task_label, w.state) for w in engine.ledger.list_workers(RUN)] == before


CODEX_FORM = (
    "• Wrote src/a/x.py\n  Would you like to run the following command?\n\n  $ make deploy\n\n"
    "› 1. Yes, proceed (y)\n  3. No, and tell Codex what to do differently (esc)\n\n  Press enter to confirm or esc to cancel\n"
)


def test_an_approval_form_makes_the_worker_blocked_with_its_text_and_orch_types_nothing(engine: Engine, herdr: FakeHerdr) -> None:
    status(herdr, PA, "blocked")
    herdr.pane(PA).screen = CODEX_FORM

    notes, waiting, _ = check_in(engine, run_of(engine))

    assert [(n.task, n.what, n.text) for n in notes] == [(
        "feature-a", "approval",
        "codex approval form: • Wrote src/a/x.py / Would you like to run the following command? / $ make deploy / › 1. Yes, proceed (y) / "
        "3. No, and tell Codex what to do differently (esc) / Press enter to confirm or esc to cancel",
    )]  # fmt: skip
    worker = engine.ledger.get_worker(RUN, "feature-a")
    assert (worker.state, waiting, keys(herdr), herdr.prompted) == (S.BLOCKED, {"feature-a"}, [], [])
    assert worker.pending_question is not None and worker.pending_question.startswith("codex approval form: • Wrote src/a/x.py")

    approved = approve(engine, run_of(engine), "feature-a", "approve")

    assert (approved.form, approved.keys, approved.state, keys(herdr)) == ("approval form", ("enter",), S.WORKING, [(PA, ("enter",))])
    # Answered once: a second approve finds no form to answer, and nothing more is typed.
    with pytest.raises(OrchError) as caught:
        approve(engine, run_of(engine), "feature-a", "approve")
    assert (caught.value.message, len(keys(herdr))) == ("feature-a is not waiting at an approval form (state working)", 1)


def test_a_form_herdr_reads_idle_mid_turn_still_makes_the_worker_blocked(engine: Engine, herdr: FakeHerdr) -> None:
    """herdr's manifests miss some forms a turn waits on (Claude Code's "Enter to continue" notices read idle): the
    quirk table reads the screen, so the worker waits blocked for `orch approve` and is never asked for a result."""
    status(herdr, PA, "idle")
    herdr.pane(PA).screen = CODEX_FORM

    notes, waiting, _ = check_in(engine, run_of(engine))

    assert [(n.task, n.what) for n in notes] == [("feature-a", "approval")]
    worker = engine.ledger.get_worker(RUN, "feature-a")
    assert (worker.state, waiting, keys(herdr), herdr.prompted) == (S.BLOCKED, {"feature-a"}, [], [])


def test_an_idle_worker_whose_screen_still_shows_work_is_not_asked_for_its_result(engine: Engine, herdr: FakeHerdr) -> None:
    status(herdr, PA, "idle")
    agent_at(herdr, PA).explain = spinner("⠙ Claude Code")
    for _ in range(3):
        notes, _, states = check_in(engine, run_of(engine))
        turned = "⠹ Claude Code" if agent_at(herdr, PA).explain == spinner("⠙ Claude Code") else "⠙ Claude Code"
        agent_at(herdr, PA).explain = spinner(turned)  # the spinner turns

    assert herdr.prompted == []
    assert [n.text for n in notes if n.task == "feature-a"] == [
        "herdr says idle, but the screen still shows work (title_spinner: ⠙ Claude Code); not asking for the result yet"
    ]
    assert (states["feature-a"], state(engine, "feature-a")) == ("working", S.WORKING)


# --- possible merges (herdr 0.8.x writes a prompt's Enter 300 ms after answering: two callbacks, one prompt) ---

QUESTION_A = "Should the greeting be formal?"
RESULT_B = "Status: done\nCommits: none\nChanged files: none\nChecks: none\nResidual risk: none"


def repeat_request(task: str) -> str:
    return f"[herdr-orchestration run={RUN} task={task} from=w1:p1 kind=follow-up reply-to=w1:p1]\n{REPEAT_REQUEST}"


def merged() -> str:
    """What the controller agent receives when feature-b's callback is typed before feature-a's Enter: one prompt."""
    return envelope("feature-a", "question", QUESTION_A) + envelope("feature-b", "result", RESULT_B)


def test_a_merged_prompt_asks_each_worker_in_turn_and_records_each_repeat_once(engine: Engine, herdr: FakeHerdr) -> None:
    status(herdr, PA, "idle")
    status(herdr, PB, "idle")  # both sent their callback and ended their turn
    kept = add_message(engine, run_of(engine), merged())
    assert (kept.verdict, kept.reason_code) == ("kept_aside", "injection")  # the Message Contract is unchanged

    first = observe(engine, run_of(engine), once=True)
    assert [(o.task, o.what, o.text) for o in first.observations] == [
        ("feature-a", "kept_aside", 'injection: body line 1 looks like an envelope header ("Should the greeting be formal?'
         '[herdr-orchestration run=w1:p1…"); a message has one header, its first line'),
        (None, "possible_merge", "holds the headers of feature-a, feature-b: possibly callbacks typed into one prompt before its "
         "Enter; nothing in it is acted on; feature-a, feature-b asked to send their last message again, one at a time"),
        ("feature-a", "asked_to_repeat", "named in possible merge #1: asked to send its last message again"),
    ]  # fmt: skip
    assert herdr.prompted == [(PA, repeat_request("feature-a"))]
    # Nothing in the kept-aside text moved anyone.
    assert (state(engine, "feature-a"), state(engine, "feature-b")) == (S.WORKING, S.WORKING)

    # Until feature-a's repeat arrives, feature-b is not asked (two repeats could merge again), nor counted as stalled.
    for seq in (2, 3, 4):
        agent_at(herdr, PA).seq = seq  # feature-a is at work on the request
        assert observe(engine, run_of(engine), once=True).observations == ()
    assert (len(herdr.prompted), state(engine, "feature-b")) == (1, S.WORKING)

    add_message(engine, run_of(engine), envelope("feature-a", "question", QUESTION_A))
    status(herdr, PA, "idle", seq=5)
    second = observe(engine, run_of(engine), once=True)
    assert [(o.task, o.what) for o in second.observations] == [("feature-a", "answered"), ("feature-b", "asked_to_repeat")]
    assert herdr.prompted[1:] == [
        (PA, f"[herdr-orchestration run={RUN} task=feature-a from=w1:p1 kind=answer reply-to=w1:p1]\nYes, formal."),
        (PB, repeat_request("feature-b")),
    ]  # fmt: skip

    repeated = add_message(engine, run_of(engine), envelope("feature-b", "result", RESULT_B))
    again = add_message(engine, run_of(engine), envelope("feature-b", "result", RESULT_B))  # a second copy: recorded once
    assert [(m.verdict, m.reason_code) for m in (repeated, again)] == [("accepted", None), ("kept_aside", "duplicate")]
    third = observe(engine, run_of(engine), once=True)
    assert [(o.task, o.what) for o in third.observations] == [("feature-b", "result"), ("feature-b", "kept_aside")]
    assert (state(engine, "feature-a"), state(engine, "feature-b"), len(herdr.prompted)) == (S.WORKING, S.RESULT, 3)
    accepted = [(m.task_label, m.kind) for m in engine.ledger.list_inbox(RUN) if m.verdict == "accepted"]
    assert accepted == [("feature-a", "question"), ("feature-b", "result")]
    assert observe(engine, run_of(engine), once=True).observations == ()  # the run goes on; nobody is asked again
    # The report keeps the kept-aside text's reason (inert where printed) and says whose headers it held.
    callbacks = render_report(build_report(engine.ledger, RUN)).splitlines()[3]
    assert callbacks == (
        f"Callbacks: run {RUN}; feature-a 1 accepted (question); feature-b 1 accepted (result); kept aside 2: "
        '#1 injection (body line 1 looks like an envelope header ("Should the greeting be formal?[herdr-orchestration run=w1:p1…"); '
        "a message has one header, its first line; possible merge of feature-a, feature-b), "
        '#4 duplicate (the same result from "feature-b" for task "feature-b" was already accepted (fingerprint 27bf0ac34bc1)); '
        "missing result: feature-a"
    )
    # `orch status` shows the kept-aside text itself, inert on one line, with the workers its headers named.
    shown = render_status(build_status(engine.ledger, RUN, engine.clock.now())).split("\n\n")[-1]
    assert shown.endswith(
        "possible merges, kept aside (the live workers they name asked to repeat; nothing in them acted on):\n"
        f"  #1 (feature-a, feature-b): [herdr-orchestration run={RUN} task=feature-a from=feature-a kind=question reply-to=w1:p2] "
        f"Should the greeting be formal?[herdr-orchestration run={RUN} task=feature-b from=feature-b kind=result reply-to=w1:…\n"
    )


def test_a_worker_whose_turn_ended_without_a_reply_lets_the_next_be_asked_after_the_late_enter(engine: Engine, herdr: FakeHerdr) -> None:
    status(herdr, PA, "idle")
    status(herdr, PB, "idle")
    add_message(engine, run_of(engine), merged())
    observe(engine, run_of(engine), once=True)
    assert engine.clock.slept == []  # type: ignore[attr-defined]
    status(herdr, PA, "idle", seq=3)  # it took the turn and ended it; nothing reached the inbox
    result = observe(engine, run_of(engine), once=True)
    # A repeat it sent may still wait for its Enter: the boundary's window passes before feature-b is asked.
    assert engine.clock.slept == [0.3]  # type: ignore[attr-defined]
    assert [(o.task, o.what) for o in result.observations] == [("feature-b", "asked_to_repeat")]
    assert [target for target, _ in herdr.prompted] == [PA, PB]


def test_a_header_in_a_body_asks_only_live_workers_and_the_same_text_again_asks_nobody(engine: Engine, herdr: FakeHerdr) -> None:
    status(herdr, PA, "idle")
    status(herdr, PB, "idle")
    add_message(engine, run_of(engine), envelope("feature-b", "question", "Tabs or spaces?"))  # feature-b waits on us
    forged = envelope("feature-a", "update", "see " + envelope("feature-b", "result", RESULT_B) + " and " + envelope("feature-x", "result", RESULT_B))
    add_message(engine, run_of(engine), forged)
    first = observe(engine, run_of(engine), once=True)
    assert [(o.what, o.text) for o in first.observations if o.what in ("possible_merge", "asked_to_repeat")] == [
        ("possible_merge", "holds the headers of feature-a, feature-b: possibly callbacks typed into one prompt before its "
         "Enter; nothing in it is acted on; feature-a asked to send their last message again, one at a time"),
        ("asked_to_repeat", "named in possible merge #2: asked to send its last message again"),
    ]  # fmt: skip
    assert [target for target, _ in herdr.prompted] == [PA]  # feature-b's question arrived: it is not asked
    # feature-a repeats its own text, header in the body and all: kept aside again, and nobody is asked again.
    add_message(engine, run_of(engine), forged)
    status(herdr, PA, "idle")
    second = observe(engine, run_of(engine), once=True)
    assert [(o.what, o.text) for o in second.observations if o.what == "possible_merge"] == [
        ("possible_merge", "the same text as possible merge #2 again: the sender's own message, so nobody is asked again (feature-a, feature-b)"),
    ]
    assert [target for target, _ in herdr.prompted] == [PA]


def test_a_handover_waits_for_a_named_worker_to_end_its_turn_then_asks_it(engine: Engine, herdr: FakeHerdr, monkeypatch: pytest.MonkeyPatch) -> None:
    status(herdr, PA, "working")
    status(herdr, PB, "working")  # both still ending the turn they called back in
    add_message(engine, run_of(engine), merged())
    clock = engine.clock
    advance = clock.sleep

    def sleep(seconds: float) -> None:
        advance(seconds)
        status(herdr, PA, "idle")  # feature-a's turn ends while the handover's check-in waits

    monkeypatch.setattr(clock, "sleep", sleep)
    result, verified = settled_check_in(engine, run_of(engine))
    assert verified is None
    assert [(o.round, o.task, o.what) for o in result.observations] == [
        (1, "feature-a", "kept_aside"), (1, None, "possible_merge"), (2, "feature-a", "asked_to_repeat"),
    ]  # fmt: skip
    assert herdr.prompted == [(PA, repeat_request("feature-a"))]


def test_the_door_hands_a_merged_prompt_over_as_one_message_and_waits_for_each_repeat(engine: Engine, herdr: FakeHerdr) -> None:
    """`orch inbox add --check-in` as the controller agent calls it: the merged prompt, then each repeat as it comes."""
    status(herdr, PA, "idle")
    status(herdr, PB, "idle")
    first = hand_over(engine, run_of(engine), merged())
    assert [(m.verdict, m.reason_code) for m in first.messages] == [("kept_aside", "injection")]
    assert [(o.task, o.what) for o in first.check_in.observations] == [
        ("feature-a", "kept_aside"), (None, "possible_merge"), ("feature-a", "asked_to_repeat")]
    assert [(n.do, n.command, n.why) for n in first.next] == [
        ("wait", f"orch wait --run {RUN}", "feature-a, feature-b still working: orch checks in while it waits and returns when something needs you")]

    status(herdr, PA, "idle", seq=2)
    second = hand_over(engine, run_of(engine), envelope("feature-a", "question", QUESTION_A))
    assert [(o.task, o.what) for o in second.check_in.observations] == [("feature-a", "answered"), ("feature-b", "asked_to_repeat")]

    status(herdr, PB, "idle", seq=2)
    third = [hand_over(engine, run_of(engine), envelope("feature-b", "result", RESULT_B)) for _ in range(2)]
    assert [(m.verdict, m.reason_code) for h in third for m in h.messages] == [("accepted", None), ("kept_aside", "duplicate")]
    # The check-in that received the result verified it (feature-b's plan entry has no verify list: git's own facts).
    assert third[0].verify is not None and [v.task for v in third[0].verify.verdicts] == ["feature-b"]
    assert state(engine, "feature-a") is S.WORKING
    assert [target for target, _ in herdr.prompted] == [PA, PA, PB]  # repeat, answer, repeat: nothing more


ANSWER = f"[herdr-orchestration run={RUN} task=feature-a from=w1:p1 kind=answer reply-to=w1:p1]\nYes, formal."


def asked_formal(engine: Engine, herdr: FakeHerdr) -> None:
    engine.ledger.transition(RUN, "feature-b", S.WORKING, S.FAILED)  # out of the way
    add_message(engine, run_of(engine), envelope("feature-a", "question", "Should the greeting be formal?"))
    status(herdr, PA, "idle")


def test_an_answer_owed_to_an_agent_that_no_longer_exists_ends_with_the_reason_instead_of_waiting_forever(engine: Engine, herdr: FakeHerdr) -> None:
    asked_formal(engine, herdr)
    herdr.pane(PA).agent = None  # herdr restarted (or the pane was closed): no agent any more

    first = observe(engine, run_of(engine), once=True)

    reason = ("its agent is gone (no agent at w1:p2: herdr agent get: agent_not_found: agent target w1:p2 not found), "
              "so the plan's answer to 'Should the greeting be formal?' cannot reach it")
    assert [(o.what, o.text) for o in first.observations] == [("gone", reason)]
    assert (state(engine, "feature-a"), answers_owed(engine, run_of(engine)), herdr.prompted) == (S.FAILED, [], [])
    assert observe(engine, run_of(engine), once=True).observations == ()


def test_a_planned_answer_whose_send_herdr_refused_is_sent_at_the_next_check_in_never_left_to_the_person(engine: Engine, herdr: FakeHerdr) -> None:
    asked_formal(engine, herdr)
    fail_prompt(herdr, HerdrError("herdr agent prompt: pane_busy: the pane is busy", code="pane_busy"), False)

    first = observe(engine, run_of(engine), once=True)

    assert [(o.what, o.text) for o in first.observations] == [
        ("send_failed", "answer to 'Should the greeting be formal?' not sent: herdr agent prompt: pane_busy: the pane is busy; tried again at a later check-in"),
    ]
    assert (state(engine, "feature-a"), answers_owed(engine, run_of(engine)), herdr.prompted) == (S.QUESTION, ["feature-a"], [])
    # The controller's door says to check in again, not to ask the person, and refuses to finish meanwhile.
    assert [(s.do, s.command) for s in next_steps(engine, run_of(engine), first.observations)] == [("wait", f"orch wait --run {RUN}")]
    with pytest.raises(OrchError) as refused:
        finish_run(engine, run_of(engine))
    assert refused.value.message == f"run {RUN} is not done: the plan's answer to feature-a is not sent yet"

    engine.clock.advance(4)  # type: ignore[attr-defined]
    assert observe(engine, run_of(engine), once=True).observations == ()  # too soon: herdr gets time to recover
    engine.clock.advance(1)  # type: ignore[attr-defined]
    second = observe(engine, run_of(engine), once=True)

    assert [(o.what, o.text) for o in second.observations] == [("answered", "Should the greeting be formal? -> Yes, formal.")]
    assert (herdr.prompted, state(engine, "feature-a"), answers_owed(engine, run_of(engine))) == ([(PA, ANSWER)], S.WORKING, [])
    observe(engine, run_of(engine), once=True)
    assert len(herdr.prompted) == 1


def test_a_planned_answer_that_timed_out_but_landed_is_settled_by_read_back_not_sent_twice(engine: Engine, herdr: FakeHerdr) -> None:
    asked_formal(engine, herdr)
    fail_prompt(herdr, HerdrTimeout("herdr agent prompt: no answer within 10s"), True)
    status(herdr, PA, "idle")

    first = observe(engine, run_of(engine), once=True)

    # Read-back, in the same check-in, saw its state_change_seq move past the baseline: the answer landed, so it is
    # recorded, not re-sent.
    assert [(o.what, o.text) for o in first.observations] == [("answered", "Should the greeting be formal? -> Yes, formal.")]
    assert (herdr.prompted, state(engine, "feature-a")) == ([(PA, ANSWER)], S.WORKING)


def test_a_planned_answer_read_back_cannot_settle_goes_to_the_person(engine: Engine, herdr: FakeHerdr) -> None:
    asked_formal(engine, herdr)
    fail_prompt(herdr, HerdrTimeout("herdr agent prompt: no answer within 10s"), False)

    first = observe(engine, run_of(engine), once=True)

    # It may still land (herdr ran to orch's limit): read back a few times a pause apart, never sent again by guess;
    # the person settles it.
    assert render_observe(first) == (
        f"Run {RUN}: 1 check-in round\n"
        "  [1] feature-a send failed #1: answer to 'Should the greeting be formal?' not sent: agent_prompt for feature-a (effect 1) "
        "got no answer from herdr (HerdrTimeout) and read-back cannot tell whether it happened: the answer to w1:p2 ended without an answer "
        "(HerdrTimeout) and w1:p2 (idle) shows no sign of it: did it arrive? Read its pane (`herdr agent read w1:p2`)\n"
        f"  [1] feature-a needs answer #1: Should the greeting be formal? (the plan's answer may have reached it: orch resume {RUN} --settle 1=sent (or 1=unsent))\n"
        "Workers:\n"
        "  feature-a (feature-a): question, herdr idle, unchanged check-ins 0\n"
        "  feature-b (feature-b): failed, unchanged check-ins 0\n"
        "Still active: no\n"
    )
    engine.clock.advance(5)  # type: ignore[attr-defined]
    second = observe(engine, run_of(engine), once=True)
    assert [o.what for o in second.observations] == []
    assert (herdr.prompted, state(engine, "feature-a"), answers_owed(engine, run_of(engine))) == ([], S.QUESTION, [])


def test_a_planned_answer_refused_at_every_attempt_goes_to_the_person_after_three(engine: Engine, herdr: FakeHerdr) -> None:
    asked_formal(engine, herdr)
    for _ in range(3):
        fail_prompt(herdr, HerdrError("herdr agent prompt: pane_busy: the pane is busy", code="pane_busy"), False)

    whats = []
    for _ in range(4):
        whats.append([o.what for o in observe(engine, run_of(engine), once=True).observations])
        engine.clock.advance(5)  # type: ignore[attr-defined]

    assert whats == [["send_failed"], ["send_failed"], ["send_failed", "needs_answer"], []]
    assert (herdr.prompted, state(engine, "feature-a"), answers_owed(engine, run_of(engine))) == ([], S.QUESTION, [])


def test_a_question_seen_before_inbox_add_moved_its_worker_is_still_answered_from_the_plan(engine: Engine, herdr: FakeHerdr) -> None:
    engine.ledger.transition(RUN, "feature-b", S.WORKING, S.FAILED)
    status(herdr, PA, "idle")
    body = "Should the greeting be formal?"
    # `orch inbox add` in the worker's pane records the message, then moves the worker: a check-in may run between.
    recorded = engine.ledger.record_inbound(
        RUN, envelope("feature-a", "question", body), source="cli", verdict=InboxVerdict.ACCEPTED, fingerprint="f1",
        task_label="feature-a", kind="question", sender="feature-a",
    )  # fmt: skip

    between = observe(engine, run_of(engine), once=True)
    Intake.of(engine, run_of(engine))._apply(recorded.id, "feature-a", "question", body)

    assert [o.what for o in between.observations] == []  # not the person's: the plan answers it
    assert state(engine, "feature-a") is S.QUESTION and answers_owed(engine, run_of(engine)) == ["feature-a"]
    after = observe(engine, run_of(engine), once=True)
    assert [(o.what, o.text) for o in after.observations] == [("answered", "Should the greeting be formal? -> Yes, formal.")]
    assert (herdr.prompted, state(engine, "feature-a")) == ([(PA, ANSWER)], S.WORKING)


def test_the_handover_check_in_sends_a_planned_answer_again_after_a_refused_send_and_says_wait_not_answer(engine: Engine, herdr: FakeHerdr) -> None:
    engine.ledger.transition(RUN, "feature-b", S.WORKING, S.FAILED)
    status(herdr, PA, "idle")
    fail_prompt(herdr, HerdrError("herdr agent prompt: agent_not_ready: agent feature-a is not an active named agent", code="agent_not_ready"), False)

    handed = hand_over(engine, run_of(engine), envelope("feature-a", "question", "Should the greeting be formal?"))

    # The same call polls on (bounded) while the answer is owed, and tries it again once herdr had time to recover.
    assert [(o.what, o.round) for o in handed.check_in.observations] == [("send_failed", 1), ("answered", 11)]
    assert (herdr.prompted, state(engine, "feature-a")) == ([(PA, ANSWER)], S.WORKING)
    assert [s.do for s in handed.next] == ["wait"] and all(o.what != "needs_answer" for o in handed.check_in.observations)


def test_what_one_result_makes_orch_read_is_bounded(engine: Engine, herdr: FakeHerdr) -> None:
    # issue 22: 40 Report lines naming one 256 KiB file grew the ledger by 66 MB. Each file is read once, at most
    # MAX_REPORTS files, at most TOTAL_LIMIT_BYTES in all; the rest is recorded unread with its reason.
    from orchestrator.reportfiles import MAX_REPORTS, TOTAL_LIMIT_BYTES

    folder = engine.run_dir(RUN) / "reports" / "feature-a"
    folder.mkdir(parents=True)
    paths = []
    for n in range(MAX_REPORTS + 2):
        (folder / f"r{n}.md").write_text(chr(ord("a") + n) * 200 * 1024)
        paths.append(str(folder / f"r{n}.md"))
    named = [paths[0], *([paths[0]] * 40), *paths[1:]]
    body = "Status: done\nCommits: none\nChanged files: none\nChecks: none\n" + "".join(f"Report: {p}\n" for p in named) + "Residual risk: none"
    added = add_message(engine, run_of(engine), envelope("feature-a", "result", body))
    assert added.verdict is InboxVerdict.ACCEPTED, added.reason
    status(herdr, PA, "idle")
    observe(engine, run_of(engine), once=True)
    facts = [e.detail for e in engine.ledger.events(RUN) if e.kind == "report"]
    assert [f["path"] for f in facts] == paths  # the one named 41 times, once
    read = [f for f in facts if f["text"] is not None]
    assert len(read) == 5 and sum(len(f["text"]) for f in read) <= TOTAL_LIMIT_BYTES
    assert [f["reason"] for f in facts[5:]] == [
        *[f"{200 * 1024} bytes, more than the {TOTAL_LIMIT_BYTES - 5 * 200 * 1024}-byte limit"] * (MAX_REPORTS - 5),
        *[f"not read: a result may name at most {MAX_REPORTS} reports"] * 2,
    ]


# --- `orch wait`: the agent controller is never left asleep ---


def test_a_wait_returns_when_a_worker_records_a_callback(engine: Engine, herdr: FakeHerdr, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = engine.clock
    advance = clock.sleep
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        advance(seconds)
        polls.append(seconds)
        if len(polls) == 3:  # the worker runs `orch inbox add` in its own pane while the controller waits
            add_message(engine, run_of(engine), envelope("feature-a", "update", "Parser done, starting on tests"))

    monkeypatch.setattr(clock, "sleep", sleep)
    waited = wait_run(engine, run_of(engine), as_json=True)

    assert (waited.woke, waited.waited_s, waited.rounds, polls) == ("callback", 3.0, 2, [1.0, 1.0, 1.0])
    assert [(o.round, o.task, o.what, o.text) for o in waited.observations] == [(2, "feature-a", "update", "Parser done, starting on tests")]
    assert [(s.do, s.command) for s in waited.next] == [("wait", f"orch wait --run {RUN} --json")]
    assert render_waited(waited).splitlines()[:3] == [
        "Woke after 3 s: callback", f"Run {RUN}: 2 check-in rounds", "  [2] feature-a update #1: Parser done, starting on tests"]


def test_a_wait_with_nothing_to_report_returns_at_its_timeout_having_checked_in_when_due(engine: Engine, herdr: FakeHerdr) -> None:
    waited = wait_run(engine, run_of(engine), timeout_s=90)

    # One check-in at once (none was made yet), the next one due 60 s later (the plan's default interval).
    assert (waited.woke, waited.waited_s, waited.rounds, waited.observations) == ("timeout", 90.0, 2, ())
    assert sum(engine.clock.slept) == 90  # type: ignore[attr-defined]
    assert [s.do for s in waited.next] == ["wait"]


def test_a_silent_worker_is_asked_then_failed_on_time_by_waits_alone(engine: Engine, herdr: FakeHerdr) -> None:
    """Nobody sleeps in the controller: it calls `orch wait` again whenever one returns, and orch keeps the interval."""
    engine.ledger.transition(RUN, "feature-b", S.WORKING, S.FAILED)  # out of the way
    status(herdr, PA, "idle")  # its turn ended without a result, and it stays silent
    woke = []
    for _ in range(10):
        waited = wait_run(engine, run_of(engine))
        woke.append((waited.woke, [o.what for o in waited.observations]))
        if state(engine, "feature-a") is S.FAILED:
            break

    # Asked for its result at the first wait; the ask starts a turn (herdr's state_change_seq moves), after which it shows
    # nothing: the third unchanged check-in after that fails it, one wait a minute, nobody sleeping.
    assert woke == [("timeout", ["asked_for_result"]), ("timeout", []), ("timeout", []), ("timeout", []), ("failed", ["failed"])]
    assert (state(engine, "feature-a"), engine.clock.monotonic()) == (S.FAILED, 300.0)  # type: ignore[attr-defined]
    assert [p for p, _ in herdr.prompted] == [PA]  # asked once, never more


def test_the_rounds_that_wait_for_an_asking_worker_to_settle_never_count_toward_anothers_stall(engine: Engine, herdr: FakeHerdr) -> None:
    # feature-a asks what the plan answers but is still ending its turn for the whole settle window; feature-b works
    # quietly (the same screen throughout). Before, every 0.5 s settle round was a check-in: feature-b failed in 1.5 s.
    handed = hand_over(engine, run_of(engine), envelope("feature-a", "question", "Should the greeting be formal?"))

    assert handed.check_in.rounds == 31 and herdr.prompted == []  # 15 s of rounds: feature-a never settled
    assert (state(engine, "feature-b"), engine.ledger.get_worker(RUN, "feature-b").unchanged_check_ins) == (S.WORKING, 0)
    assert [o.what for o in handed.check_in.observations] == []


def test_a_wait_hands_over_a_question_once_its_worker_ended_the_turn_it_asked_in(engine: Engine, herdr: FakeHerdr, monkeypatch: pytest.MonkeyPatch) -> None:
    """`orch answer` reaches only a settled worker: the wait that reports a question returns when the answer can go."""
    add_message(engine, run_of(engine), envelope("feature-b", "question", "Tabs or spaces?"))  # still ending its turn
    clock = engine.clock
    advance = clock.sleep
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        advance(seconds)
        polls.append(seconds)
        if len(polls) == 4:
            status(herdr, PB, "idle")

    monkeypatch.setattr(clock, "sleep", sleep)
    waited = wait_run(engine, run_of(engine), as_json=True)

    assert (waited.woke, polls) == ("decision", [0.5] * 4)
    assert [(s.do, s.task, s.command) for s in waited.next] == [
        ("answer", "feature-b", f"orch answer --run {RUN} feature-b --json -- TEXT"), ("wait", None, f"orch wait --run {RUN} --json")]
    sent = messages.send_message(engine, run_of(engine), "feature-b", "answer", "Spaces.")
    assert (sent.kind, sent.state) == ("answer", S.WORKING)


def test_a_wait_drives_the_run_only_while_it_checks_in(engine: Engine, herdr: FakeHerdr) -> None:
    """One driver per run: a wait never checks in while another orch process drives the run, and holds the lock only
    for its check-in, so `orch answer` (or a person's command) runs between two waits' check-ins."""
    import fcntl
    import os

    from orchestrator import driver

    lock = engine.run_dir(RUN) / driver.LOCK_FILE
    other = os.open(lock, os.O_RDWR | os.O_CREAT)  # another process's hold: its own open file
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    add_message(engine, run_of(engine), envelope("feature-a", "update", "halfway"))

    held = wait_run(engine, run_of(engine), timeout_s=3)
    assert (held.woke, held.rounds, herdr.prompted) == ("timeout", 0, [])
    fcntl.flock(other, fcntl.LOCK_UN)

    waited = wait_run(engine, run_of(engine), timeout_s=3)
    assert (waited.woke, [o.what for o in waited.observations]) == ("callback", ["update"])
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again once the wait returned
    os.close(other)


@pytest.mark.parametrize("down", ["hung", "stopped"])
def test_herdr_down_in_orch_wait_stops_the_run_as_orch_run_does_and_names_the_one_next_step(
    engine: Engine, herdr: FakeHerdr, down: str
) -> None:
    # Issue 21: `orch wait` (every door command) let a herdr outage out as the raw boundary line with exit 3, the run
    # left `active`: the controller could only loop. It now ends as `orch run` does: the run interrupted, nothing
    # failed, one line, and next[] the one command that goes on once herdr is back.
    from click.testing import CliRunner

    from orchestrator.cli import cli

    if down == "hung":
        herdr.fail_next("agent list", error=_hangs("agent list"))
        why, said = "not answering", "herdr agent list: no answer within 30s; killed"
    else:
        herdr.fail_next("agent list", "server_not_running", "herdr server is not running")
        why, said = "down", "herdr agent list: herdr server is not running (server_not_running: herdr server is not running)"
    engine.command = "orch wait"
    before = [(w.task_label, w.state) for w in engine.ledger.list_workers(RUN)]

    shown = CliRunner().invoke(cli, ["wait", "--run", RUN, "--json"], obj={"engine": engine})

    line = (
        f"herdr is {why}: {said}; run {RUN} stopped during orch wait, no worker was failed for it, workers and evidence are in place: "
        f"`orch wait --run {RUN}` once it is back"
    )
    assert shown.exit_code == 3
    assert shown.stderr == f"orch: {line}\n"
    assert json.loads(shown.stdout) == {
        "ok": False, "error": "HerdrDown", "reason": line, "problems": [line], "hint": None, "exit_code": 3,
        "next": [{"do": "resume", "task": None, "command": f"orch wait --run {RUN} --json",
                  "why": "herdr is down or not answering: tell the user and stop; run this once they say herdr is back"}],
    }  # fmt: skip
    assert (run_of(engine).status, run_of(engine).stopped_at) == ("interrupted", f"herdr is {why} during orch wait")
    assert [(w.task_label, w.state) for w in engine.ledger.list_workers(RUN)] == before
    assert (engine.run_dir(RUN) / "report.md").exists()


def test_herdr_down_in_a_door_command_on_an_orch_run_run_says_orch_resume(engine: Engine, herdr: FakeHerdr) -> None:
    """A door command on a run `orch run` drives (e.g. the person's `orch answer`) goes on with `orch resume RUN`."""
    from click.testing import CliRunner

    from orchestrator.cli import cli

    engine.ledger.update_run(RUN, controller_kind="run")
    herdr.fail_next("agent list", error=_hangs("agent list"))

    shown = CliRunner().invoke(cli, ["observe", "--once", "--run", RUN], obj={"engine": engine})

    assert (shown.exit_code, shown.stdout) == (3, "")
    assert shown.stderr.endswith(f"`orch resume {RUN}` once it is back\n")


def on_the_box(tmp_path: Path, engine: Engine) -> tuple[FakeHerdr, str]:
    """The build box's herdr with feature-r's idle agent, the run's plan naming the box, and feature-r working there."""
    box = FakeHerdr(cwd=tmp_path / "box", version="0.8.2")
    pane = box.tab_create(workspace="w1").root_pane.pane_id
    box.add_agent(pane, "feature-r", "codex", status="idle", explain=NO_HOOK)
    box.pane(pane).screen = ""
    engine.host_herdrs["buildbox"] = box
    # Its spool there is empty (orchestrator.spool collects it over ssh at every check-in).
    engine.remote_runner = lambda argv, *, env, timeout: subprocess.CompletedProcess(argv, 0, '{"messages": []}' if "spooled" in argv[-1] else "", "")
    plan = PLAN.replace('[[workers]]\ntask = "feature-a"', '[hosts.buildbox]\nmachine = "buildbox"\nssh = "me@buildbox"\ncheckout = "/srv/acme/widgets"\n\n'
                        '[[workers]]\ntask = "feature-r"\nobjective = "Do R."\ndeliverable = "Commits."\nbranch = "feat/r"\nclaim = ["src/r/**"]\nhost = "buildbox"\n\n'
                        '[[workers]]\ntask = "feature-a"', 1)
    (engine.run_dir(RUN) / "plan.toml").write_text(plan)
    engine.ledger.add_worker(RUN, "feature-r", name="feature-r", kind="codex", objective="x", pane_id=pane, reply_target=pane, host="buildbox")
    for before, after in ((S.PROVISIONING, S.READY), (S.READY, S.DISPATCHED), (S.DISPATCHED, S.WORKING)):
        engine.ledger.transition(RUN, "feature-r", before, after)
    engine.ledger.transition(RUN, "feature-b", S.WORKING, S.FAILED)  # out of the way
    return box, pane


def test_a_worker_on_another_host_is_read_and_messaged_through_its_hosts_herdr_though_its_pane_id_is_a_local_ones(tmp_path: Path, engine: Engine, herdr: FakeHerdr) -> None:
    # The build box's herdr numbers its panes from w1 too: its worker sits in w1:p2, the id of feature-a's pane here.
    box, pane = on_the_box(tmp_path, engine)

    first, second = (observe(engine, run_of(engine), once=True) for _ in range(2))

    # Settled on its own host (feature-a works in the local pane of the same id): asked once for its result, there.
    assert pane == PA and agent_at(herdr, PA).status == "working"
    assert [[(o.task, o.what) for o in r.observations] for r in (first, second)] == [[], [("feature-r", "asked_for_result")]]
    assert len(box.prompted) == 1 and box.prompted[0][0] == PA and "task=feature-r" in box.prompted[0][1]
    assert herdr.prompted == []
    asked = [e for e in engine.ledger.list_effects(RUN, task_label="feature-r") if e.kind == "agent_prompt"]
    assert [(e.request["target"], e.request["host"]) for e in asked] == [(PA, "buildbox")]


def test_a_host_gone_at_a_check_in_is_said_and_its_workers_wait_while_the_controllers_go_on(tmp_path: Path, engine: Engine, herdr: FakeHerdr) -> None:
    box, _ = on_the_box(tmp_path, engine)
    gone = HostUnreachable("herdr --machine buildbox agent list: machine 'buildbox' (session acme): ssh: connect to host me@buildbox port 22: Connection refused")
    for _ in range(3 * 3):  # three rounds, each read tried three times
        box.fail_next("agent list", error=gone)
    status(herdr, PA, "idle")

    rounds = [observe(engine, run_of(engine), once=True) for _ in range(3)]

    # feature-a (here) is asked for its result at its second settled round; feature-r is never looked at, never failed.
    said = [[(o.task, o.what) for o in r.observations] for r in rounds]
    assert said == [[(None, "host_unreachable")], [(None, "host_unreachable"), ("feature-a", "asked_for_result")], [(None, "host_unreachable")]]
    assert (state(engine, "feature-r"), box.prompted) == (S.WORKING, [])
