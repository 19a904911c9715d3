"""Controller -> worker messages: who may be interrupted, once per key, failures recorded verbatim; report paths read safely."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import CannotTell, Engine
from orchestrator.errors import HerdrError, HerdrNotFound, OrchError
from orchestrator.herdr_models import AgentInfo, AgentPrompted
from orchestrator.inbox import add_message
from orchestrator.messages import ReportRead, read_report, send_message, settle_prompt
from registry import Effect, EffectStatus, InboxVerdict, WorkerState

S = WorkerState
RUN = "w1:p1-20261130T080000Z"


@dataclass
class FakeHerdr:
    status: str = "idle"
    fail_with: str | None = None
    prompts: list[str] = field(default_factory=list)
    on_prompt: Callable[[], object] | None = None  # what happens while herdr submits (a fast worker's callback)

    def agent_get(self, target: str) -> AgentInfo:
        return AgentInfo(terminal_id="t", agent_status=self.status, workspace_id="w1", tab_id="w1:t1", pane_id=target,
                         focused=False, revision=1, state_change_seq=1)  # fmt: skip

    def agent_prompt(self, target: str, text: str, **_: object) -> AgentPrompted:
        if self.fail_with:
            raise HerdrError(self.fail_with, code="agent_not_found")
        self.prompts.append(text)
        if self.on_prompt is not None:
            self.on_prompt()
        return AgentPrompted(type="agent_prompted", agent=self.agent_get(target))


@pytest.fixture
def herdr() -> FakeHerdr:
    return FakeHerdr()


@pytest.fixture
def engine(tmp_path: Path, herdr: FakeHerdr) -> Engine:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path, src_root=tmp_path)
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock())  # type: ignore[arg-type]
    engine.ledger.create_run(RUN, controller_target="w1:p1")
    engine.ledger.add_worker(RUN, "feature-a", name="feature-a", kind="codex", objective="x", pane_id="w1:pa",
                             reply_target="w1:pa", worktree_path=str(tmp_path / "wt"))  # fmt: skip
    for a, b in ((S.PROVISIONING, S.READY), (S.READY, S.DISPATCHED), (S.DISPATCHED, S.QUESTION)):
        engine.ledger.transition(RUN, "feature-a", a, b)
    yield engine
    engine.close()


def test_answer_goes_to_the_reply_target_once_and_resumes_the_worker(engine: Engine, herdr: FakeHerdr) -> None:
    run = engine.ledger.get_run(RUN)
    sent = send_message(engine, run, "feature-a", "answer", "Keep English only.")
    assert (sent.target, sent.state, herdr.prompts) == (
        "w1:pa", S.WORKING, [f"[herdr-orchestration run={RUN} task=feature-a from=w1:p1 kind=answer reply-to=w1:p1]\nKeep English only."],
    )  # fmt: skip
    herdr.status = "done"
    send_message(engine, run, "feature-a", "answer", "Keep English only.")  # same text, same key: replayed, not re-sent
    assert len(herdr.prompts) == 1


def test_an_answer_whose_worker_calls_back_before_the_send_is_recorded_counts_as_sent(engine: Engine, herdr: FakeHerdr) -> None:
    # The agent takes the answer, works and sends its result (`orch inbox add` moves it question -> result) before
    # this process records the send: the answer was submitted, and the worker stands where its result put it.
    herdr.on_prompt = lambda: engine.ledger.transition(RUN, "feature-a", S.QUESTION, S.RESULT, cause={"test": "a fast result"})
    run = engine.ledger.get_run(RUN)

    sent = send_message(engine, run, "feature-a", "answer", "Keep English only.")

    assert (sent.state, len(herdr.prompts)) == (S.RESULT, 1)
    assert [(e.kind, e.status) for e in engine.ledger.list_effects(RUN)] == [("agent_prompt", EffectStatus.CONFIRMED)]
    assert engine.ledger.get_worker(RUN, "feature-a").state is S.RESULT
    herdr.on_prompt = None
    send_message(engine, run, "feature-a", "answer", "Keep English only.")  # the same answer again: replayed, not re-sent
    assert len(herdr.prompts) == 1


def test_a_question_the_worker_asks_while_its_answer_is_sent_keeps_its_text(engine: Engine, herdr: FakeHerdr) -> None:
    # The agent takes the answer and asks its next question (a real callback, through the intake) before this process
    # records the send. The send's own move clears the answered question; the late one moves the worker back, and its
    # text is what status shows and what the plan's answers are matched against.
    def ask() -> None:
        engine.clock.advance(1)  # type: ignore[attr-defined]
        envelope = f"[herdr-orchestration run={RUN} task=feature-a from=feature-a kind=question reply-to=w1:pa]\nWhich Python version?"
        assert add_message(engine, engine.ledger.get_run(RUN), envelope).verdict is InboxVerdict.ACCEPTED

    herdr.on_prompt = ask
    run = engine.ledger.get_run(RUN)

    sent = send_message(engine, run, "feature-a", "answer", "Keep English only.")

    worker = engine.ledger.get_worker(RUN, "feature-a")
    assert (sent.state, worker.state, worker.pending_question, len(herdr.prompts)) == (S.QUESTION, S.QUESTION, "Which Python version?", 1)


def test_a_working_worker_gets_only_a_stop_or_an_urgent_follow_up(engine: Engine, herdr: FakeHerdr) -> None:
    run = engine.ledger.get_run(RUN)
    herdr.status = "working"
    with pytest.raises(OrchError) as caught:
        send_message(engine, run, "feature-a", "follow-up", "Also update the docs.")
    assert caught.value.message == "worker feature-a is working in herdr; a follow-up goes only to a worker that is idle or done"
    assert herdr.prompts == [] and engine.ledger.list_effects(RUN) == []
    send_message(engine, run, "feature-a", "follow-up", "Only touch src/a.", urgent=True)
    send_message(engine, run, "feature-a", "stop", "Stop now.")
    assert [p.split("kind=")[1].split(" ")[0] for p in herdr.prompts] == ["follow-up", "stop"]


def test_a_failed_send_is_recorded_verbatim_and_not_retried(engine: Engine, herdr: FakeHerdr) -> None:
    herdr.fail_with = "agent w1:pa not found"
    with pytest.raises(HerdrError):
        send_message(engine, engine.ledger.get_run(RUN), "feature-a", "answer", "Yes.")
    [effect] = engine.ledger.list_effects(RUN)
    assert (effect.status, effect.error) == (EffectStatus.FAILED, "agent w1:pa not found")
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


@dataclass
class ScreenHerdr(FakeHerdr):
    """An agent whose seq and screen a test sets; a prompt lands on the screen and moves the seq."""

    seq: int = 1
    screen: str = "› "
    gone: bool = False

    def agent_get(self, target: str) -> AgentInfo:
        if self.gone:
            raise HerdrNotFound("herdr agent get: agent_not_found: no agent", code="agent_not_found")
        return AgentInfo(terminal_id="t", agent_status=self.status, workspace_id="w1", tab_id="w1:t1", pane_id=target,
                         focused=False, revision=1, state_change_seq=self.seq)  # fmt: skip

    def agent_read(self, target: str, *, source: str = "recent", lines: int | None = None) -> str:
        return self.screen


def _in_flight_answer(engine: Engine) -> Effect:
    """The answer's effect as a crash right after it was intended leaves it (baseline seq 1)."""
    text = f"[herdr-orchestration run={RUN} task=feature-a from=w1:p1 kind=answer reply-to=w1:p1]\nKeep English only."
    return engine.ledger.intend(RUN, "feature-a", "agent_prompt", "feature-a:answer:k",
                                {"target": "w1:pa", "kind": "answer", "text": text, "baseline_seq": 1})  # fmt: skip


def _settled(engine: Engine, effect: Effect) -> tuple[str, str]:
    answer = settle_prompt(engine, engine.ledger.get_run(RUN), effect)
    return type(answer).__name__, getattr(answer, "how", None) or getattr(answer, "question", "")


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda h: setattr(h, "seq", 3), ("Done", "state_change_seq moved from 1 to 3")),
        (lambda h: setattr(h, "screen", "› Keep English only.\n  Working…"), ("Done", "its screen shows the text")),
        (lambda h: None, ("NotDone", "w1:pa is idle, state_change_seq still 1, the text not on its screen 3s after the send was intended")),
        (lambda h: setattr(h, "gone", True), ("NotDone", "no agent w1:pa: nothing can have received the answer")),
    ],
)
def test_prompt_read_back_decides_from_seq_screen_and_elapsed_time(tmp_path: Path, setup: Any, expected: tuple[str, str]) -> None:
    herdr = ScreenHerdr()
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path, src_root=tmp_path)
    clock = FakeClock()
    engine = Engine(settings=settings, herdr=herdr, clock=clock)  # type: ignore[arg-type]
    engine.ledger.create_run(RUN, controller_target="w1:p1")
    engine.ledger.add_worker(RUN, "feature-a", name="feature-a", kind="codex", objective="x", pane_id="w1:pa", reply_target="w1:pa")
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
    engine.herdr.agent_read = lambda *a, **k: "› "  # type: ignore[attr-defined]
    answer = settle_prompt(engine, engine.ledger.get_run(RUN), effect)
    assert answer == CannotTell(
        "the answer to w1:pa ended without an answer (HerdrTimeout) and w1:pa (idle) shows no sign of it: did it arrive? "
        "Read its pane (`herdr agent read w1:pa`)",
        f"orch resume {RUN} --settle 1=sent (or 1=unsent)",
    )
    engine.ledger.record_fact(RUN, "effect_decided", task_label="feature-a", detail={"effect_id": effect.id, "answer": "unsent"})
    assert _settled(engine, effect) == ("NotDone", "the person said it was not sent")
