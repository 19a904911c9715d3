"""Engine.once against a real ledger: replay, retry after a recorded failure, and outcomes left unknown (in flight)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.effects import EFFECTS, settler
from orchestrator.engine import CannotTell, Done, Engine, InFlightEffect, NotDone, orch_executable
from orchestrator.errors import HerdrCallLost, HerdrError, HerdrNotFound, HerdrProtocolError, HerdrTimeout, HerdrUnavailable
from orchestrator.herdr import HerdrCli
from orchestrator.herdr_models import AgentPrompted
from registry import Effect, EffectStatus

RUN_ID = "w1:p1-20261130T080000Z"


@dataclass(frozen=True, kw_only=True)
class Made:
    """An effect's result as orch records its own: a plain frozen dataclass."""

    pane_id: str


class Acts:
    """Counts calls to the side effect and to the read-back; raises whatever is queued."""

    def __init__(self, *raises: Exception | None) -> None:
        self.raises = list(raises)
        self.acted = 0
        self.settled = 0
        self.found: Made | None = None

    def act(self) -> Made:
        self.acted += 1
        error = self.raises.pop(0) if self.raises else None
        if error is not None:
            raise error
        return Made(pane_id=f"w1:p{self.acted}")

    def settle(self) -> Made | None:
        self.settled += 1
        return self.found


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    settings = Settings(home=tmp_path / "home", orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=Path("/src"))
    engine = Engine(settings=settings, herdr=None, clock=FakeClock(), env={})  # type: ignore[arg-type]
    engine.ledger.create_run(RUN_ID, controller_target="w1:p1", organization="acme", repo="widgets", repo_path="/src/acme/widgets",
                             base_ref="origin/main", base_sha="1" * 40, plan_path="plan.toml")
    return engine


def once(engine: Engine, acts: Acts, **options: object) -> Made:
    return engine.once(RUN_ID, None, "pane_split", "split", {"pane": "w1:p1"}, acts.act, model=Made, settle=acts.settle, **options)  # type: ignore[arg-type]


def statuses(engine: Engine) -> list[tuple[str, str]]:
    return [(e.key, str(e.status)) for e in engine.ledger.list_effects(RUN_ID)]


def test_a_confirmed_effect_is_replayed_not_repeated(engine: Engine) -> None:
    acts = Acts()
    assert once(engine, acts) == once(engine, acts) == Made(pane_id="w1:p1")
    assert (acts.acted, acts.settled) == (1, 0)
    assert statuses(engine) == [("split", "confirmed")]


def test_a_response_an_earlier_orch_stored_is_replayed_as_the_same_result_of_either_kind(engine: Engine) -> None:
    # Rows as earlier orch versions wrote them (pydantic's JSON dump of the result): a record of orch's own, and one of
    # herdr's response models (still pydantic, the herdr-JSON edge).
    agent = {"terminal_id": "term_2", "agent_status": "working", "workspace_id": "w1", "tab_id": "w1:t2", "pane_id": "w1:p2",
             "focused": False, "revision": 3, "state_change_seq": 7, "name": "feature-a"}  # fmt: skip
    for key, response in (("split", {"pane_id": "w1:p4"}), ("prompt", {"type": "agent_prompted", "agent": agent})):
        engine.ledger.confirm(engine.ledger.intend(RUN_ID, None, "pane_split", key, {"pane": "w1:p1"}), response)
    acts = Acts()

    assert once(engine, acts) == Made(pane_id="w1:p4")
    prompted = engine.once(RUN_ID, None, "pane_split", "prompt", {"pane": "w1:p1"}, acts.act, model=AgentPrompted)  # type: ignore[arg-type]
    assert prompted == AgentPrompted.model_validate({"type": "agent_prompted", "agent": agent})
    assert acts.acted == 0
    assert [e.response for e in engine.ledger.list_effects(RUN_ID)] == [{"pane_id": "w1:p4"}, {"type": "agent_prompted", "agent": agent}]


def test_a_failed_effect_is_retried_under_a_new_attempt_key(engine: Engine) -> None:
    acts = Acts(HerdrError("herdr pane split: pane_not_found: no pane", code="pane_not_found"))
    with pytest.raises(HerdrError):
        once(engine, acts)
    assert once(engine, acts) == Made(pane_id="w1:p2")
    assert statuses(engine) == [("split", "failed"), ("split#2", "confirmed")]


LOST = HerdrTimeout("herdr pane split: no answer within 30 s (killed)")


def unknown_facts(engine: Engine) -> list[dict[str, object]]:
    return [e.detail for e in engine.ledger.events(RUN_ID) if e.kind == "effect_unknown"]


def settled_facts(engine: Engine) -> list[dict[str, object]]:
    return [e.detail for e in engine.ledger.events(RUN_ID) if e.kind == "effect_settled"]


def test_a_lost_call_is_settled_by_read_back_in_the_same_call_and_the_phase_goes_on(engine: Engine) -> None:
    acts = Acts(LOST)
    acts.found = Made(pane_id="w1:p7")

    assert once(engine, acts) == Made(pane_id="w1:p7")

    assert (acts.acted, acts.settled) == (1, 1)
    effect = engine.ledger.find_effect(RUN_ID, "split")
    assert effect is not None and effect.status is EffectStatus.CONFIRMED and effect.response == {"pane_id": "w1:p7"}
    assert unknown_facts(engine) == [{"effect_id": 1, "kind": "pane_split", "key": "split", "error": "HerdrTimeout", "message": "herdr pane split: no answer within 30 s (killed)"}]


@pytest.mark.parametrize("lost", [LOST, HerdrCallLost("herdr pane split: the herdr process died of signal 9; its outcome is unknown"),
                                  HerdrProtocolError("herdr pane split: unexpected exit 0: garbage")])
def test_read_back_that_proves_a_lost_call_did_not_happen_makes_it_again_under_the_next_attempt_key(engine: Engine, lost: Exception) -> None:
    acts = Acts(lost)
    acts.found = NotDone("no pane in the checkout")  # type: ignore[assignment]

    assert once(engine, acts) == Made(pane_id="w1:p2")

    assert (acts.acted, acts.settled) == (2, 1)
    assert statuses(engine) == [("split", "abandoned"), ("split#2", "confirmed")]
    assert settled_facts(engine) == [{"effect_id": 1, "kind": "pane_split", "key": "split", "answer": "not_done", "how": "no pane in the checkout"}]
    assert engine.ledger.find_effect(RUN_ID, "split").error == "read back: not done (no pane in the checkout)"  # type: ignore[union-attr]


def test_read_back_that_proves_a_lost_call_happened_confirms_it_with_how_it_decided(engine: Engine) -> None:
    acts = Acts(LOST)
    acts.found = Done(Made(pane_id="w1:p9"), "pane w1:p9 is in the checkout")  # type: ignore[assignment]

    assert once(engine, acts) == Made(pane_id="w1:p9")

    assert statuses(engine) == [("split", "confirmed")]
    assert settled_facts(engine) == [{"effect_id": 1, "kind": "pane_split", "key": "split", "answer": "done", "how": "pane w1:p9 is in the checkout"}]


class Landing(Acts):
    """Read-back cannot tell at first; the effect shows up on the third read (a slow call, not a lost one)."""

    def settle(self) -> Made | CannotTell:  # type: ignore[override]
        self.settled += 1
        return Made(pane_id="w1:p5") if self.settled == 3 else CannotTell("did the split land?", "orch resume --settle 1=sent")


def test_read_back_is_repeated_with_a_pause_until_it_can_tell(engine: Engine) -> None:
    acts = Landing(LOST)

    assert once(engine, acts) == Made(pane_id="w1:p5")

    assert (acts.acted, acts.settled) == (1, 3)
    assert engine.clock.slept == [1.0, 1.0]  # type: ignore[attr-defined]
    assert statuses(engine) == [("split", "confirmed")]


def test_read_back_that_never_can_tell_stops_with_one_question_and_the_command_that_answers_it(engine: Engine) -> None:
    acts = Acts(LOST)
    acts.found = CannotTell("did the split land?", "orch resume --settle 1=sent")  # type: ignore[assignment]

    with pytest.raises(InFlightEffect) as caught:
        once(engine, acts)

    assert (caught.value.message, caught.value.hint) == (
        "pane_split for w1:p1-20261130T080000Z (effect 1) got no answer from herdr (HerdrTimeout) and read-back cannot tell whether it happened: did the split land?",
        "orch resume --settle 1=sent",
    )
    assert (acts.acted, acts.settled) == (1, 4)
    assert engine.clock.slept == [1.0, 1.0, 1.0]  # type: ignore[attr-defined]
    assert statuses(engine) == [("split", "intended")]
    # A later process (`orch resume`) asks the same read-back again, never repeats the call.
    with pytest.raises(InFlightEffect) as again:
        once(engine, acts)
    assert again.value.message == "pane_split for w1:p1-20261130T080000Z (effect 1) was started by an earlier orch process and read-back cannot tell whether it happened: did the split land?"
    assert acts.acted == 1


class Silent(Acts):
    def settle(self) -> Made | None:
        self.settled += 1
        raise HerdrTimeout("herdr pane get: no answer within 30 s (killed)")


def test_a_read_back_herdr_does_not_answer_either_is_herdr_down_and_leaves_the_effect_in_flight(engine: Engine) -> None:
    acts = Silent(LOST)

    with pytest.raises(HerdrUnavailable) as caught:
        once(engine, acts)

    assert caught.value.message == "herdr did not answer the read-back of pane_split (effect 1) after its call was lost: herdr pane get: no answer within 30 s (killed)"
    assert (acts.acted, acts.settled) == (1, 4)
    assert statuses(engine) == [("split", "intended")]


class Gone(Acts):
    def settle(self) -> Made | None:
        self.settled += 1
        raise HerdrNotFound("herdr pane get: pane_not_found: no pane w1:p1", code="pane_not_found")


def test_a_read_back_that_finds_its_subject_gone_abandons_the_effect_and_says_so(engine: Engine) -> None:
    acts = Gone(LOST)

    with pytest.raises(HerdrNotFound):
        once(engine, acts)

    assert statuses(engine) == [("split", "abandoned")]
    assert settled_facts(engine) == [{"effect_id": 1, "kind": "pane_split", "key": "split", "answer": "not_done", "how": "read-back found it gone: herdr pane get: pane_not_found: no pane w1:p1"}]


def test_an_effect_kind_missing_from_the_effects_table_is_refused_before_anything_is_recorded(engine: Engine) -> None:
    acts = Acts()
    with pytest.raises(Exception) as caught:
        engine.once(RUN_ID, None, "pane_teleport", "x", {}, acts.act, model=Made)
    assert str(caught.value) == "effect kind pane_teleport is not in orchestrator.effects.EFFECTS; say there how read-back settles it"
    assert (acts.acted, statuses(engine)) == (0, [])


def test_an_error_not_listed_as_unknown_still_fails_the_effect(engine: Engine) -> None:
    acts = Acts(HerdrError("herdr pane split: pane_not_found: no pane", code="pane_not_found"))
    with pytest.raises(HerdrError):
        once(engine, acts, unknown_on=(HerdrTimeout,))
    assert statuses(engine) == [("split", "failed")]


@pytest.mark.parametrize("controller", ["agent", "run"])
def test_every_worker_records_its_callback_in_the_durable_inbox_whatever_its_controller(tmp_path: Path, controller: str) -> None:
    """No worker text is typed into the controller's pane or passes through its shell: an agent controller's workers
    call back exactly as `orch run`'s do (the old `herdr agent prompt <controller>` let a body end the controller's heredoc)."""
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "p", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=HerdrCli("/opt/herdr/bin/herdr"), clock=FakeClock(), env={}, controller=controller)
    run = engine.ledger.create_run(RUN_ID, controller_target="w1:p1")

    assert engine.callback_prefix(run) == ("env", f"ORCH_HOME={tmp_path / 'orch'}", orch_executable(), "inbox", "add", "--run", RUN_ID)
    engine.close()


@pytest.mark.parametrize("kind", sorted(EFFECTS))
def test_every_effect_kind_settles_a_lost_call_by_its_own_read_back_in_the_same_call(engine: Engine, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert callable(settler(kind))  # the kind's read-back exists where orchestrator.effects says
    asked: list[str] = []

    def read_back(engine: Engine, run: object, effect: Effect) -> Made:
        asked.append(effect.kind)
        return Made(pane_id="w1:p9")

    monkeypatch.setattr("orchestrator.effects.settler", lambda k: read_back)
    acts = Acts(HerdrCallLost("herdr x: the herdr process died of signal 9; its outcome is unknown"))

    assert engine.once(RUN_ID, None, kind, "k", {"x": 1}, acts.act, model=Made) == Made(pane_id="w1:p9")

    assert (asked, acts.acted, statuses(engine)) == ([kind], 1, [("k", "confirmed")])
