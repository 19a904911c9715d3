"""Controller -> worker messages: who may be interrupted, once per key, failures recorded verbatim; report paths read safely."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from fake_herdr import FakeHerdr

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import CannotTell, Engine
from orchestrator.effects import to_json
from orchestrator.errors import HerdrError, OrchError
from orchestrator.intake import add_message
from orchestrator.messages import ReportRead, read_report, send_message, settle_prompt
from registry import Effect, EffectStatus, InboxVerdict, WorkerState

S = WorkerState
RUN = "w1:p1-20261130T080000Z"


PANE = "w1:p2"  # the worker's pane: the first split of the controller's (tests/helpers/fake_herdr.py mints it)


@pytest.fixture
def herdr(tmp_path: Path) -> FakeHerdr:
    """herdr with the controller's pane and the worker's agent, feature-a (codex, idle) beside it."""
    herdr = FakeHerdr(cwd=tmp_path)
    assert herdr.pane_split("w1:p1", direction="right").pane_id == PANE
    herdr.add_agent(PANE, "feature-a", "codex")
    return herdr


def prompts(herdr: FakeHerdr) -> list[str]:
    return herdr.agent("feature-a").prompts


@pytest.fixture
def engine(tmp_path: Path, herdr: FakeHerdr) -> Engine:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path, src_root=tmp_path)
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock())
    engine.ledger.create_run(RUN, controller_target="w1:p1")
    engine.ledger.add_worker(RUN, "feature-a", name="feature-a", kind="codex", objective="x", pane_id=PANE,
                             reply_target=PANE, worktree_path=str(tmp_path / "wt"))  # fmt: skip
    for a, b in ((S.PROVISIONING, S.READY), (S.READY, S.DISPATCHED), (S.DISPATCHED, S.QUESTION)):
        engine.ledger.transition(RUN, "feature-a", a, b)
    yield engine
    engine.close()


def test_answer_goes_to_the_reply_target_once_and_resumes_the_worker(engine: Engine, herdr: FakeHerdr) -> None:
    run = engine.ledger.get_run(RUN)
    sent = send_message(engine, run, "feature-a", "answer", "Keep English only.")
    assert (sent.target, sent.state, prompts(herdr)) == (
        PANE, S.WORKING, [f"[herdr-orchestration run={RUN} task=feature-a from=w1:p1 kind=answer reply-to=w1:p1]\nKeep English only."],
    )  # fmt: skip
    herdr.set_status("feature-a", "done")
    send_message(engine, run, "feature-a", "answer", "Keep English only.")  # same text, same key: replayed, not re-sent
    assert len(prompts(herdr)) == 1


def test_an_answer_says_the_state_orch_holds_now_apart_from_what_herdr_said_when_it_took_it(engine: Engine, herdr: FakeHerdr) -> None:
    # herdr took the answer from an agent at rest (done); orch now holds the worker `working`: two fields, each named for
    # what it is, never an `agent_status: done` beside `state: working` that reads as a contradiction.
    herdr.set_status("feature-a", "done")
    herdr.agent("feature-a").reacts = "later"  # herdr answers the prompt before the new turn shows
    sent = send_message(engine, engine.ledger.get_run(RUN), "feature-a", "answer", "-1 is not allowed; use 50.")
    assert to_json(sent) == {  # what `orch answer --json` prints
        "run_id": RUN, "task": "feature-a", "kind": "answer", "target": PANE,
        "text": f"[herdr-orchestration run={RUN} task=feature-a from=w1:p1 kind=answer reply-to=w1:p1]\n-1 is not allowed; use 50.",
        "herdr_status_at_send": "done", "state": "working",
    }  # fmt: skip
    assert engine.ledger.get_worker(RUN, "feature-a").state is S.WORKING


def test_an_answer_whose_worker_calls_back_before_the_send_is_recorded_counts_as_sent(engine: Engine, herdr: FakeHerdr) -> None:
    # The agent takes the answer, works and sends its result (`orch inbox add` moves it question -> result) before
    # this process records the send: the answer was submitted, and the worker stands where its result put it.
    herdr.agent("feature-a").on_prompt = lambda: engine.ledger.transition(RUN, "feature-a", S.QUESTION, S.RESULT, cause={"test": "a fast result"})
    run = engine.ledger.get_run(RUN)

    sent = send_message(engine, run, "feature-a", "answer", "Keep English only.")

    assert (sent.state, len(prompts(herdr))) == (S.RESULT, 1)
    assert [(e.kind, e.status) for e in engine.ledger.list_effects(RUN)] == [("agent_prompt", EffectStatus.CONFIRMED)]
    assert engine.ledger.get_worker(RUN, "feature-a").state is S.RESULT
    herdr.agent("feature-a").on_prompt = None
    herdr.set_status("feature-a", "done")  # its turn, which sent the result, is over
    send_message(engine, run, "feature-a", "answer", "Keep English only.")  # the same answer again: replayed, not re-sent
    assert len(prompts(herdr)) == 1


def test_a_question_the_worker_asks_while_its_answer_is_sent_keeps_its_text(engine: Engine, herdr: FakeHerdr) -> None:
    # The agent takes the answer and asks its next question (a real callback, through the intake) before this process
    # records the send. The send's own move clears the answered question; the late one moves the worker back, and its
    # text is what status shows and what the plan's answers are matched against.
    def ask() -> None:
        engine.clock.advance(1)  # type: ignore[attr-defined]
        envelope = f"[herdr-orchestration run={RUN} task=feature-a from=feature-a kind=question reply-to=w1:p2]\nWhich Python version?"
        assert add_message(engine, engine.ledger.get_run(RUN), envelope).verdict is InboxVerdict.ACCEPTED

    herdr.agent("feature-a").on_prompt = ask
    run = engine.ledger.get_run(RUN)

    sent = send_message(engine, run, "feature-a", "answer", "Keep English only.")

    worker = engine.ledger.get_worker(RUN, "feature-a")
    assert (sent.state, worker.state, worker.pending_question, len(prompts(herdr))) == (S.QUESTION, S.QUESTION, "Which Python version?", 1)


def test_a_working_worker_gets_only_a_stop_or_an_urgent_follow_up(engine: Engine, herdr: FakeHerdr) -> None:
    run = engine.ledger.get_run(RUN)
    herdr.set_status("feature-a", "working")
    with pytest.raises(OrchError) as caught:
        send_message(engine, run, "feature-a", "follow-up", "Also update the docs.")
    assert caught.value.message == "worker feature-a is working in herdr; a follow-up goes only to a worker that is idle or done"
    assert prompts(herdr) == [] and engine.ledger.list_effects(RUN) == []
    send_message(engine, run, "feature-a", "follow-up", "Only touch src/a.", urgent=True)
    send_message(engine, run, "feature-a", "stop", "Stop now.")
    assert [p.split("kind=")[1].split(" ")[0] for p in prompts(herdr)] == ["follow-up", "stop"]


def test_a_failed_send_is_recorded_verbatim_and_not_retried(engine: Engine, herdr: FakeHerdr) -> None:
    herdr.fail_next("agent prompt", "agent_not_found", "agent target w1:p2 not found")
    with pytest.raises(HerdrError):
        send_message(engine, engine.ledger.get_run(RUN), "feature-a", "answer", "Yes.")
    [effect] = engine.ledger.list_effects(RUN)
    assert (effect.status, effect.error) == (EffectStatus.FAILED, "herdr agent prompt: agent_not_found: agent target w1:p2 not found")
    assert engine.ledger.get_worker(RUN, "feature-a").state is S.QUESTION


def test_reports_are_read_only_inside_allowed_roots_and_under_the_limit(engine: Engine, tmp_path: Path) -> None:
    run, worker = engine.ledger.get_run(RUN), engine.ledger.get_worker(RUN, "feature-a")
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / "REPORT.md").write_text("# ok\n")
    (tmp_path / "secret.md").write_text("secret\n")
    (tmp_path / "wt" / "link.md").symlink_to(tmp_path / "secret.md")
    reports = engine.run_dir(RUN) / "reports" / "feature-a"
    reports.mkdir(parents=True)
    (reports / "checks.md").write_text("x" * 11)
    sim = Path(tempfile.gettempdir()) / "herdr-sim-reports" / RUN
    sim.mkdir(parents=True, exist_ok=True)
    (sim / "feature-a.md").write_text("# not a place the packet names\n")
    roots = "outside the worker's checkout and its report directory"
    assert [read_report(engine, run, worker, str(p), limit=10) for p in (
        tmp_path / "wt" / "REPORT.md", tmp_path / "secret.md", tmp_path / "wt" / "link.md", reports / "checks.md", sim / "feature-a.md",
    )] + [read_report(engine, run, worker, "REPORT.md")] == [
        ReportRead(path=str(tmp_path / "wt" / "REPORT.md"), text="# ok\n"),
        ReportRead(path=str(tmp_path / "secret.md"), reason=roots),
        ReportRead(path=str(tmp_path / "wt" / "link.md"), reason="a symbolic link (orch follows none)"),
        ReportRead(path=str(reports / "checks.md"), reason="11 bytes, more than the 10-byte limit"),
        ReportRead(path=str(sim / "feature-a.md"), reason=roots),
        ReportRead(path="REPORT.md", reason="not an absolute path"),
    ]  # fmt: skip
    (sim / "feature-a.md").unlink()


# --- read-back of a prompt an earlier process left in flight (orchestrator.messages.settle_prompt) ---


def _in_flight_answer(engine: Engine) -> Effect:
    """The answer's effect as a crash right after it was intended leaves it (baseline seq 1)."""
    text = f"[herdr-orchestration run={RUN} task=feature-a from=w1:p1 kind=answer reply-to=w1:p1]\nKeep English only."
    return engine.ledger.intend(RUN, "feature-a", "agent_prompt", "feature-a:answer:k",
                                {"target": PANE, "kind": "answer", "text": text, "baseline_seq": 1})  # fmt: skip


def _settled(engine: Engine, effect: Effect) -> tuple[str, str]:
    answer = settle_prompt(engine, engine.ledger.get_run(RUN), effect)
    return type(answer).__name__, getattr(answer, "how", None) or getattr(answer, "question", "")


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda h: setattr(h.agent("feature-a"), "seq", 3), ("Done", "state_change_seq moved from 1 to 3")),
        (lambda h: setattr(h.pane(PANE), "screen", "› Keep English only.\n  Working…"), ("Done", "its screen shows the text")),
        (lambda h: setattr(h.pane(PANE), "screen", "› "), ("NotDone", "w1:p2 is idle, state_change_seq still 1, the text not on its screen 3s after the send was intended")),
        (lambda h: setattr(h.pane(PANE), "agent", None), ("NotDone", "no agent w1:p2: nothing can have received the answer")),
    ],
)
def test_prompt_read_back_decides_from_seq_screen_and_elapsed_time(tmp_path: Path, herdr: FakeHerdr, setup: Any, expected: tuple[str, str]) -> None:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path, src_root=tmp_path)
    clock = FakeClock()
    engine = Engine(settings=settings, herdr=herdr, clock=clock)
    engine.ledger.create_run(RUN, controller_target="w1:p1")
    engine.ledger.add_worker(RUN, "feature-a", name="feature-a", kind="codex", objective="x", pane_id=PANE, reply_target=PANE)
    effect = _in_flight_answer(engine)
    setup(herdr)
    assert _settled(engine, effect) == expected
    engine.close()


def test_a_callback_after_the_send_proves_the_prompt_landed(engine: Engine) -> None:
    effect = _in_flight_answer(engine)
    engine.clock.advance(1)  # type: ignore[attr-defined]
    engine.ledger.record_inbound(RUN, "raw", source="test", verdict=InboxVerdict.ACCEPTED, fingerprint="f1", task_label="feature-a", kind="update")
    assert _settled(engine, effect) == ("Done", "callback #1 (update) arrived after the send was intended")


def test_a_prompt_that_timed_out_without_a_trace_is_one_question_with_the_command_that_answers_it(engine: Engine, herdr: FakeHerdr) -> None:
    effect = _in_flight_answer(engine)
    engine.ledger.record_fact(RUN, "effect_unknown", task_label="feature-a", detail={"effect_id": effect.id, "error": "HerdrTimeout"})
    herdr.pane(PANE).screen = "› "
    answer = settle_prompt(engine, engine.ledger.get_run(RUN), effect)
    assert answer == CannotTell(
        "the answer to w1:p2 ended without an answer (HerdrTimeout) and w1:p2 (idle) shows no sign of it: did it arrive? "
        "Read its pane (`herdr agent read w1:p2`)",
        f"orch resume {RUN} --settle 1=sent (or 1=unsent)",
    )
    engine.ledger.record_fact(RUN, "effect_decided", task_label="feature-a", detail={"effect_id": effect.id, "answer": "unsent"})
    assert _settled(engine, effect) == ("NotDone", "the person said it was not sent")


def test_a_message_to_a_worker_whose_agent_is_gone_is_one_line_and_records_nothing(engine: Engine, herdr: FakeHerdr) -> None:
    # A settled worker's agent exits to free its slot for a queued one: the trial's controller then tried to send a
    # rejected worker back and met herdr's raw "not found" with no hint.
    run = engine.ledger.get_run(RUN)
    herdr.pane_close(PANE)

    with pytest.raises(OrchError) as caught:
        send_message(engine, run, "feature-a", "answer", "Keep English only.")

    assert (caught.value.message, caught.value.hint) == (
        f"worker feature-a has no agent in herdr any more ({PANE} is gone): the answer was not sent",
        f"its work is kept (branch none, `orch status --run {RUN}`); orch cannot send it back once its agent has exited: "
        "tell the user, who may have the work redone in a new run",
    )
    assert engine.ledger.list_effects(RUN) == []
