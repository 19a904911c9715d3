"""The shared fake herdr (tests/helpers/fake_herdr.py) keeps the ``Herdr`` protocol's shape and herdr's semantics."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest
from fake_herdr import FakeHerdr, herdr_number

from orchestrator.errors import HerdrCallLost, HerdrConfirmationRequired, HerdrError, HerdrNotFound, HerdrPaneBusy, HerdrWorktreeCreateFailed
from orchestrator.herdr import Herdr, argv_of

# The fake is a Herdr for mypy (`python3 -m mypy` checks tests/helpers/fake_herdr.py, which says the same).
_: Herdr = FakeHerdr()


def protocol_methods() -> list[str]:
    return sorted(name for name, value in vars(Herdr).items() if inspect.isfunction(value) and not name.startswith("_"))


def test_the_fake_has_every_protocol_method_with_the_same_signature() -> None:
    """Fails when the protocol gains a method the fake lacks, or a parameter, default or type differs."""
    names = protocol_methods()
    assert len(names) > 40  # the protocol was read, not an empty list
    missing = [name for name in names if not callable(getattr(FakeHerdr, name, None))]
    assert missing == []
    differ = {
        name: (str(inspect.signature(getattr(Herdr, name), eval_str=True)), str(inspect.signature(getattr(FakeHerdr, name), eval_str=True)))
        for name in names
        if inspect.signature(getattr(Herdr, name), eval_str=True) != inspect.signature(getattr(FakeHerdr, name), eval_str=True)
    }
    assert differ == {}
    fake = FakeHerdr()
    assert {name: type(getattr(fake, name)).__name__ for name in Herdr.__annotations__} == {"binary": "str", "calls": "list"}


def test_ids_are_minted_in_order_and_never_reused(git_repo: Any) -> None:
    assert [herdr_number(n) for n in (1, 9, 10, 31, 32, 33)] == ["1", "9", "A", "Z", "0", "11"]
    herdr = FakeHerdr(cwd=git_repo.path)
    second = herdr.pane_split("w1:p1", direction="right")
    herdr.pane_close(second.pane_id)
    third = herdr.pane_split("w1:p1", direction="down")
    tab = herdr.tab_create(workspace="w1", label="more")
    ws = herdr.workspace_create(cwd=git_repo.path)
    assert (second.pane_id, third.pane_id, tab.tab.tab_id, tab.root_pane.pane_id, ws.workspace.workspace_id) == ("w1:p2", "w1:p3", "w1:t2", "w1:p4", "w2")
    assert [t.label for t in herdr.tab_list(workspace="w1")] == ["1", "more"]


def test_worktree_create_adds_a_real_checkout_in_a_new_workspace_and_a_move_brings_its_pane_home(git_repo: Any, tmp_path: Path) -> None:
    herdr = FakeHerdr(cwd=git_repo.path)
    path = tmp_path / "wt" / "widgets-feat-x"
    made = herdr.worktree_create(workspace="w1", branch="feat/x", base="main", path=path, label="widgets-feat-x")

    assert git_repo.git("rev-parse", "--abbrev-ref", "HEAD", cwd=path) == "feat/x"
    assert (made.workspace.workspace_id, made.tab.tab_id, made.root_pane and made.root_pane.pane_id, made.worktree.branch) == ("w2", "w2:t1", "w2:p1", "feat/x")
    listed = herdr.worktree_list(workspace="w1").worktrees
    assert [(w.branch, w.open_workspace_id, w.is_linked_worktree) for w in listed] == [("main", "w1", False), ("feat/x", "w2", True)]

    moved = herdr.pane_move_new_tab("w2:p1", workspace="w1", label="widgets-feat-x")
    assert (moved.pane.pane_id, moved.pane.tab_id, moved.closed_workspace_id, moved.previous_pane_id) == ("w1:p2", "w1:t2", "w2", "w2:p1")
    assert herdr.pane_get("w2:p1").pane_id == "w1:p2"  # the old id is an alias for pane commands
    assert [w.workspace_id for w in herdr.workspace_list()] == ["w1"]

    with pytest.raises(HerdrWorktreeCreateFailed) as failed:
        herdr.worktree_create(workspace="w1", branch="feat/x", path=tmp_path / "wt" / "other")
    assert failed.value.code == "worktree_create_failed" and "already" in (failed.value.herdr_message or "")
    assert herdr.commands() == ["worktree create", "worktree list", "pane move", "pane get", "workspace list", "worktree create"]


def test_agents_answer_with_herdrs_codes_as_the_real_boundary_types_them(git_repo: Any) -> None:
    herdr = FakeHerdr(cwd=git_repo.path, ready_screens={"codex": "› \n"})
    pane = herdr.pane_split("w1:p1", direction="right").pane_id
    started = herdr.agent_start("api", kind="codex", pane=pane, timeout_ms=30_000)
    assert (started.agent.name, started.agent.pane_id, started.agent.interactive_ready, started.agent.completion_seq) == ("api", "w1:p2", True, 0)
    assert herdr.pane_read(pane, source="visible") == "› \n"

    with pytest.raises(HerdrNotFound) as gone:
        herdr.agent_get("nobody")
    assert (gone.value.code, gone.value.message) == ("agent_not_found", "herdr agent get: agent_not_found: agent target nobody not found")
    with pytest.raises(HerdrPaneBusy):
        herdr.agent_start("again", kind="codex", pane=pane)

    herdr.agent_prompt("api", "do it")
    herdr.set_status("api", "done")
    info = herdr.agent_get(pane)
    assert (info.agent_status, info.state_change_seq, info.completion_seq, herdr.agent("api").prompts) == ("done", 3, 1, ["do it"])


def test_fault_hooks_fail_the_next_call_before_or_after_it_acted(git_repo: Any) -> None:
    herdr = FakeHerdr(cwd=git_repo.path)
    herdr.fail_next("pane split", "pane_not_found", "pane w1:p1 not found")
    with pytest.raises(HerdrNotFound):
        herdr.pane_split("w1:p1", direction="right")
    assert len(herdr.panes) == 1  # refused before acting

    herdr.lose_next("pane split")
    with pytest.raises(HerdrCallLost) as lost:
        herdr.pane_split("w1:p1", direction="right")
    assert lost.value.message == "herdr pane split: the herdr process died of signal 9; its outcome is unknown"
    assert sorted(herdr.panes) == ["w1:p1", "w1:p2"]  # herdr did split: only the answer was lost
    assert [c.returncode for c in herdr.calls] == [1, -9]


def test_closing_a_groups_parent_pane_needs_confirmation(git_repo: Any, tmp_path: Path) -> None:
    herdr = FakeHerdr(cwd=git_repo.path)
    herdr.worktree_create(workspace="w1", branch="feat/y", path=tmp_path / "wt" / "y")
    with pytest.raises(HerdrConfirmationRequired):
        herdr.pane_close("w1:p1")
    assert "w1:p1" in herdr.panes


def test_every_call_records_the_argv_herdrcli_builds_never_one_of_its_own(git_repo: Any) -> None:
    """The fake takes each argv from the real boundary (argv_of): no protocol method hands ``_call`` an argv it built."""
    import fake_herdr

    tree = ast.parse(inspect.getsource(fake_herdr.FakeHerdr))
    built_here = [
        f"{fn.name}:{node.lineno}"
        for fn in tree.body[0].body  # type: ignore[attr-defined]
        if isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_")
        for node in ast.walk(fn)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_call"
        and not (isinstance(node.args[0], ast.Name) or (isinstance(node.args[0], ast.Call) and getattr(node.args[0].func, "attr", None) == "_argv"))
    ] + [
        f"{fn.name}:{node.lineno}"
        for fn in tree.body[0].body  # type: ignore[attr-defined]
        if isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_")
        for node in fn.body
        if isinstance(node, ast.Assign | ast.AugAssign) and "argv" in ast.unparse(node).split("=")[0]
        and not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", None) == "_argv")
    ]
    assert built_here == []

    herdr = FakeHerdr(cwd=git_repo.path)
    herdr.trust_repository = True
    herdr.worktree_list(workspace="w1")
    assert herdr.argvs() == [argv_of("worktree_list", (), {"workspace": "w1"}, features=herdr.features(), trust_repository=True)]
    assert "--trust-repository" in herdr.argvs()[0]


def test_an_agent_leaves_on_its_exit_command_ends_its_turn_on_a_stop_and_rests_after_its_gets(git_repo: Any) -> None:
    herdr = FakeHerdr(cwd=git_repo.path)
    pane = herdr.tab_create(workspace="w1").root_pane.pane_id
    agent = herdr.add_agent(pane, "api", "codex", status="working", rests_after=2)
    assert [herdr.agent_get("api").agent_status for _ in range(2)] == ["working", "idle"]

    herdr.set_status("api", "working")
    herdr.agent_prompt("api", "[herdr-orchestration run=r task=api from=w1:p1 kind=stop reply-to=w1:p1]")
    assert agent.status == "idle"

    herdr.pane_send_text(pane, "/quit")
    herdr.pane_send_keys(pane, "Enter")
    assert herdr.pane(pane).agent is agent  # not its exit command
    herdr.pane_send_text(pane, "/exit")
    herdr.pane_send_keys(pane, "Enter")
    assert herdr.pane(pane).agent is None and herdr.pane(pane).screen.endswith("$ \n")
    with pytest.raises(HerdrNotFound):
        herdr.agent_get(pane)


def test_explain_evidence_a_screen_after_keys_and_every_prompt_taken_in_order(git_repo: Any) -> None:
    from orchestrator.herdr_models import AgentExplain

    herdr = FakeHerdr(cwd=git_repo.path)
    a, b = (herdr.tab_create(workspace="w1").root_pane.pane_id for _ in range(2))
    herdr.add_agent(a, "a", "codex", explain=AgentExplain(state="working", fallback_reason="title spinner"))
    herdr.add_agent(b, "b", "codex")
    assert (herdr.agent_explain("a").fallback_reason, herdr.agent_explain("b").state) == ("title spinner", "idle")

    herdr.pane(a).screen, herdr.pane(a).after_keys = "Approve? [y/n]\n", "• Approved\n"
    herdr.pane_send_keys(a, "enter")
    assert herdr.pane_read(a) == "• Approved\n"

    herdr.agent_prompt("b", "one")
    herdr.fail_next("agent prompt", "pane_busy", "the pane is busy")
    with pytest.raises(HerdrError):
        herdr.agent_prompt(a, "refused")
    herdr.agent_prompt(a, "two")
    assert herdr.prompted == [(b, "one"), (a, "two")]
