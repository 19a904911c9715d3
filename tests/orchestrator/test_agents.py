"""The per-kind agent table and plan-mode entry (key presses through engine.once, confirmation from a pane read)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from orchestrator.agents import AGENTS, enter_plan_mode, facts, plan_mode_problem
from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.herdr import HerdrCli
from orchestrator.layout import HERDR_AGENT_KINDS
from registry import Worker

OK = '{"id":"cli:agent:send-keys","result":{"type":"ok"}}\n'


class Screens:
    """The runner seam: `agent read` answers the next screen, `agent send-keys` answers ok; argv is recorded."""

    def __init__(self, *screens: str) -> None:
        self.screens = list(screens)
        self.argvs: list[list[str]] = []

    def __call__(self, argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        self.argvs.append(list(argv))
        out = self.screens.pop(0) if argv[1:3] == ["agent", "read"] else OK
        return subprocess.CompletedProcess(list(argv), 0, out, "")


def make(tmp_path: Path, runner: Screens, kind: str = "claude") -> tuple[Engine, Worker]:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "p", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=HerdrCli("herdr", runner=runner, sleep=lambda s: None), clock=FakeClock())
    engine.ledger.create_run("w1:p1-r", controller_target="w1:p1")
    worker = engine.ledger.add_worker("w1:p1-r", "docs", name="docs", kind=kind, objective="o")
    return engine, worker


def test_the_table_covers_every_herdr_kind_with_its_executable() -> None:
    assert tuple(AGENTS) == HERDR_AGENT_KINDS
    assert {k: f.executable for k, f in AGENTS.items() if f.executable != k} == {"cursor": "cursor-agent", "kiro": "kiro-cli"}
    assert {k: f.exit_command for k, f in AGENTS.items() if f.exit_command} == {**dict.fromkeys(("claude", "codex", "gemini", "opencode"), "/exit"), "pi": "/quit"}
    assert {k: (f.plan_mode.key, f.plan_mode.confirm_text, f.plan_mode.max_presses) for k, f in AGENTS.items() if f.plan_mode} == {
        "claude": ("shift+tab", "plan mode on", 3)
    }


def test_plan_mode_problem_names_the_kinds_that_have_one() -> None:
    assert plan_mode_problem("claude") is None
    assert plan_mode_problem("pi") == (
        'plan-first needs a plan mode orch can enter and confirm on screen; pi has no known plan mode (use mode = "direct" or a kind with one: claude)'
    )
    with pytest.raises(OrchError, match=r"^'nope' is not a herdr agent kind \(pi, claude, "):
        facts("nope")


def test_enter_plan_mode_presses_until_the_screen_confirms(tmp_path: Path) -> None:
    runner = Screens("> \n  ? for shortcuts", "  ⏵⏵ accept edits on (shift+tab to cycle)", "  ⏸ plan mode on (shift+tab to cycle)")
    engine, worker = make(tmp_path, runner)

    screen = enter_plan_mode(engine, worker)

    assert screen == "  ⏸ plan mode on (shift+tab to cycle)"
    assert [a[1:] for a in runner.argvs] == [
        ["agent", "read", "docs", "--source", "visible"], ["agent", "send-keys", "docs", "shift+tab"],
        ["agent", "read", "docs", "--source", "visible"], ["agent", "send-keys", "docs", "shift+tab"],
        ["agent", "read", "docs", "--source", "visible"],
    ]  # fmt: skip
    assert [(e.key, e.status) for e in engine.ledger.list_effects("w1:p1-r")] == [("docs:plan_mode_key:1", "confirmed"), ("docs:plan_mode_key:2", "confirmed")]
    assert engine.clock.slept == [0.5, 0.5]  # type: ignore[attr-defined]
    assert engine.ledger.events("w1:p1-r", task_label="docs")[-1].detail == {"presses": 2, "confirm_text": "plan mode on"}


def test_enter_plan_mode_gives_up_after_the_cycle_and_never_confirms_blindly(tmp_path: Path) -> None:
    engine, worker = make(tmp_path, Screens("a", "b", "c", "d"))

    with pytest.raises(OrchError) as caught:
        enter_plan_mode(engine, worker)

    assert caught.value.message == "docs: pressed shift+tab 3 times and docs's screen never showed 'plan mode on'; plan mode is not confirmed"


def test_enter_plan_mode_refuses_a_kind_without_one(tmp_path: Path) -> None:
    runner = Screens()
    engine, worker = make(tmp_path, runner, kind="codex")

    with pytest.raises(OrchError, match=r"^docs: plan-first needs a plan mode .* codex has no known plan mode"):
        enter_plan_mode(engine, worker)
    assert runner.argvs == []
