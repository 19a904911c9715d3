"""Preflight decisions on small models, and whole preflights against a scripted herdr runner with real git and SQLite."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.herdr import HerdrCli, RetryPolicy
from orchestrator.herdr_models import HerdrStatus, PaneInfo, WorkspaceInfo
from orchestrator.preflight import (
    REQUIRED_COMMANDS,
    current_session,
    integration_problems,
    match_repo_workspace,
    missing_groups,
    missing_methods,
    pick_default_branch,
    preflight,
    render_preflight,
)
from registry import WorkerState

DATA = Path(__file__).resolve().parent / "data" / "herdr"

# --- pure decisions -------------------------------------------------------------------------------------------------


def test_capabilities_from_schema_methods_name_the_missing_cli_commands() -> None:
    methods = [method for _, method in REQUIRED_COMMANDS]

    assert missing_methods(methods) == []
    assert missing_methods([m for m in methods if m not in ("pane.move", "pane.send_input")]) == ["pane move", "pane run"]


def test_capabilities_fallback_reads_command_groups_from_help() -> None:
    groups = ("workspace", "worktree", "tab", "agent", "pane")
    full = "".join(f"       herdr {group} <subcommand> ...\n" for group in groups)

    assert missing_groups(full) == []
    assert missing_groups(full.replace("herdr worktree <subcommand>", "")) == ["worktree"]


def status(session: str | None) -> HerdrStatus:
    data = json.loads((DATA / "status.json").read_text())
    data["client"]["session"] = data["server"]["session"] = session
    return HerdrStatus.model_validate(data)


@pytest.mark.parametrize(("session", "expected"), [(None, "default"), ("acme", "acme")])
def test_current_session_is_herdrs_active_name_or_default(session: str | None, expected: str) -> None:
    assert current_session(status(session)) == expected


def cli_answering(stdout: str) -> HerdrCli:
    def runner(argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 0, stdout, "")

    return HerdrCli("herdr", runner=runner)


def test_integration_status_text_to_verdict_per_worker_kind() -> None:
    entries = cli_answering((DATA / "integration_status.txt").read_text()).integration_status()

    assert integration_problems(["claude", "codex", "pi", "opencode", "gemini"], entries) == [
        ("pi", "not installed"),
        ("opencode", "outdated (legacy < v2)"),
        ("gemini", "herdr offers no integration for it"),
    ]
    assert integration_problems(["claude", "codex"], entries) == []


@pytest.mark.parametrize(
    ("origin_head", "base", "local", "remote", "expected"),
    [
        ("origin/trunk", "origin/main", {"main"}, {"origin/main", "origin/trunk"}, ("trunk", "origin/HEAD")),
        (None, "origin/develop", {"main"}, {"origin/develop"}, ("develop", "the base origin/develop")),
        (None, "main", {"main"}, set(), ("main", "the base main")),
        (None, "refs/heads/main", {"main"}, set(), ("main", "the base refs/heads/main")),
        (None, "v1.2", {"master"}, set(), ("master", "the local branch")),
        (None, "v1.2", {"feat/x"}, set(), ("main", "no origin/HEAD, base branch, main or master found")),
    ],
)
def test_default_branch_discovery(origin_head: str | None, base: str, local: set[str], remote: set[str], expected: tuple[str, str]) -> None:
    assert pick_default_branch(origin_head, base, local, remote) == expected


def workspace(ws_id: str, number: int, label: str, worktree: dict[str, Any] | None = None) -> WorkspaceInfo:
    data: dict[str, Any] = {"workspace_id": ws_id, "number": number, "label": label, "focused": False, "pane_count": 1,
                            "tab_count": 1, "active_tab_id": f"{ws_id}:t1", "agent_status": "unknown"}  # fmt: skip
    if worktree is not None:
        data["worktree"] = worktree
    return WorkspaceInfo.model_validate(data)


def pane(ws_id: str, cwd: str) -> PaneInfo:
    return PaneInfo.model_validate({"pane_id": f"{ws_id}:p1", "terminal_id": "term_1", "workspace_id": ws_id, "tab_id": f"{ws_id}:t1",
                                    "focused": False, "agent_status": "unknown", "revision": 0, "cwd": cwd})  # fmt: skip


def membership(root: Path, checkout: Path, linked: bool) -> dict[str, Any]:
    return {"repo_key": f"{root}/.git", "repo_name": root.name, "repo_root": str(root), "checkout_path": str(checkout), "is_linked_worktree": linked}


def test_repo_workspace_is_found_by_pane_cwd_and_prefers_the_callers(tmp_path: Path) -> None:
    checkout = tmp_path / "widgets"
    (checkout / "src").mkdir(parents=True)
    workspaces = [workspace("w1", 1, "widgets"), workspace("w2", 2, "scratch"), workspace("w3", 3, "other")]
    panes = [pane("w1", str(checkout)), pane("w2", str(checkout / "src")), pane("w3", str(tmp_path))]

    found = [match_repo_workspace(workspaces, panes, checkout, "widgets", caller) for caller in ("w2", "w3", None)]

    assert [ws.workspace_id if ws else None for ws in found] == ["w2", "w1", "w1"]


def test_repo_workspace_by_worktree_membership_never_a_linked_worktree(tmp_path: Path) -> None:
    checkout, linked = tmp_path / "widgets", tmp_path / "widgets.worktrees" / "widgets-feat-x"
    workspaces = [
        workspace("w1", 1, "widgets-feat-x", membership(checkout, linked, True)),
        workspace("w2", 2, "widgets", membership(checkout, checkout, False)),
    ]
    # A linked worktree's pane cwd never makes it the repo workspace, even when the cwd is the primary checkout.
    panes = [pane("w1", str(checkout)), pane("w2", str(tmp_path))]

    assert match_repo_workspace(workspaces, panes, checkout, "widgets", "w1") == workspaces[1]
    assert match_repo_workspace(workspaces[:1], panes, checkout, "widgets", "w1") is None


# --- whole preflights against a scripted herdr --------------------------------------------------------------------

PLAN = """\
organization = "acme"
repo = "widgets"
base = "origin/main"

[[workers]]
task = "api-pagination"
objective = "Add cursor pagination."
deliverable = "Commits."
branch = "feat/api-pagination"
claim = ["src/**"]
"""


class ScriptedHerdr:
    """The runner seam: answers each herdr argv from a table (stdout, or an exception to raise) and records the argv."""

    def __init__(self, answers: dict[tuple[str, ...], str | BaseException | tuple[int, str, str]]) -> None:
        self.answers = answers
        self.argvs: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        words = tuple(argv[1:])
        self.argvs.append(words)
        answer = self.answers[words]
        if isinstance(answer, BaseException):
            raise answer
        rc, out, err = answer if isinstance(answer, tuple) else (0, answer, "")
        return subprocess.CompletedProcess(list(argv), rc, out, err)


def envelope(rid: str, result: dict[str, Any]) -> str:
    return json.dumps({"id": rid, "result": result})


def herdr_answers(checkout: Path) -> dict[tuple[str, ...], str | BaseException | tuple[int, str, str]]:
    """A healthy herdr 0.7.5 in session acme whose caller pane w1:p1 is the root of workspace w1 on the checkout."""
    methods = {"oneOf": [{"properties": {"method": {"const": m}}} for _, m in REQUIRED_COMMANDS]}
    shell = json.loads(pane("w1", str(checkout)).model_dump_json(exclude_none=True))
    tab = {"tab_id": "w1:t1", "workspace_id": "w1", "number": 1, "label": "widgets", "focused": True, "pane_count": 1, "agent_status": "unknown"}
    return {
        ("--version",): "herdr 0.7.5\n",
        ("api", "schema", "--json"): json.dumps({"schemas": {"request": methods}}),
        ("status", "--json"): status("acme").model_dump_json(),
        ("session", "list", "--json"): json.dumps({"sessions": [{"name": "acme", "default": False, "running": True, "socket_path": "/s", "session_dir": "/d"}]}),
        ("integration", "status"): "codex: current (v6) (/home/me/.codex/herdr-agent-state.sh)\n",
        ("pane", "current", "--current"): envelope("cli:pane:current", {"type": "pane_current", "pane": shell}),
        ("agent", "get", "w1:p1"): (1, "", '{"id":"cli:agent:get","error":{"code":"agent_not_found","message":"agent target w1:p1 not found"}}\n'),
        ("agent", "list"): envelope("cli:agent:list", {"type": "agent_list", "agents": []}),
        ("workspace", "list"): envelope("cli:workspace:list", {"type": "workspace_list", "workspaces": [json.loads(workspace("w1", 1, "widgets").model_dump_json(exclude_none=True))]}),
        ("pane", "list"): envelope("cli:pane:list", {"type": "pane_list", "panes": [shell]}),
        ("tab", "list", "--workspace", "w1"): envelope("cli:tab:list", {"type": "tab_list", "tabs": [tab]}),
    }


def make_engine(tmp_path: Path, answers: dict[tuple[str, ...], Any], env: dict[str, str] | None = None) -> tuple[Engine, ScriptedHerdr]:
    runner = ScriptedHerdr(answers)
    herdr = HerdrCli("herdr", runner=runner, retry=RetryPolicy(read_attempts=1))
    settings = Settings(home=tmp_path / "home", orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock(), env=env if env is not None else {"HERDR_ENV": "1", "HERDR_PANE_ID": "w1:p1"})
    return engine, runner


@pytest.fixture
def cloned(tmp_path: Path, git_repo_factory: Callable[[Path], Any]) -> Path:
    """The checkout <src>/acme/widgets as a clone, so it has origin/HEAD."""
    upstream = git_repo_factory(tmp_path / "upstream")
    upstream.git("branch", "-m", "trunk")
    checkout = tmp_path / "src" / "acme" / "widgets"
    subprocess.run(["git", "clone", "--quiet", str(upstream.path), str(checkout)], check=True, timeout=30)
    subprocess.run(["git", "-C", str(checkout), "branch", "--quiet", "main", "origin/trunk"], check=True, timeout=30)
    subprocess.run(["git", "-C", str(checkout), "update-ref", "refs/remotes/origin/main", "origin/trunk"], check=True, timeout=30)
    return checkout


def test_preflight_with_an_existing_labelled_tab_makes_no_side_effect(tmp_path: Path, cloned: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    engine, runner = make_engine(tmp_path, herdr_answers(cloned))

    result = preflight(engine, plan)

    assert render_preflight(result).replace(str(tmp_path), "<tmp>") == (
        "✓ herdr env       HERDR_ENV=1\n"
        "✓ plan            acme/widgets, base origin/main, 1 worker (codex)\n"
        "✓ herdr           herdr 0.7.5 client, protocol 17\n"
        "✓ capabilities    all 28 herdr commands the run uses are in herdr api schema\n"
        "✓ server          running herdr 0.7.5, protocol 17, compatible\n"
        "✓ features        agent state for finished turns (completion_seq needs 0.9.2), no plan-first (shift+tab needs 0.8.2)\n"
        "✓ session         acme serves organization acme\n"
        "✓ integrations    codex current (v6)\n"
        "✓ caller pane     w1:p1 in workspace w1, tab w1:t1: a shell, not an agent; controller target pinned to w1:p1\n"
        "✓ agents          none running\n"
        "✓ repo checkout   <tmp>/src/acme/widgets: primary checkout; default branch trunk (from origin/HEAD)\n"
        f"✓ base ref        origin/main is {result.repo.base_sha if result.repo else ''}\n"
        "✓ repo workspace  w1 \"widgets\" (the caller's workspace) serves <tmp>/src/acme/widgets\n"
        "✓ repo tab        w1:t1 is labelled \"widgets\"\n"
        "✓ run             1 worker registered as queued (concurrency 4); plan snapshot <tmp>/orch/runs/w1_p1-20261130T080000Z/plan.toml\n"
        "w1:p1-20261130T080000Z\n"
    )
    assert not any(words[:2] in (("workspace", "create"), ("tab", "rename")) for words in runner.argvs)
    run = engine.ledger.get_run("w1:p1-20261130T080000Z")
    assert (run.default_branch, run.workspace_id, run.repo_tab_id, run.created_workspace_ids) == ("trunk", "w1", "w1:t1", ())
    assert [(w.task_label, w.state) for w in engine.ledger.list_workers(run.run_id)] == [("api-pagination", WorkerState.QUEUED)]
    assert engine.ledger.list_effects(run.run_id) == []
    # The run's message limit is fixed with its plan snapshot, for every callback to read cheaply.
    assert (engine.run_dir(run.run_id) / "limits.json").read_text() == '{"message_limit_bytes": 65536}\n'


def _release(answers: dict[tuple[str, ...], Any], version: str, protocol: int, *, server: str | None = None) -> None:
    """Make the scripted herdr another release: its --version, and status --json's client and server."""
    data = json.loads(answers[("status", "--json")])
    data["client"].update(version=version, protocol=protocol)
    data["server"].update(version=server or version, protocol=protocol, restart_needed=(server or version) != version)
    data["update"]["restart_needed"] = (server or version) != version  # herdr's rule: any version difference
    answers[("--version",)] = f"herdr {version}\n"
    answers[("status", "--json")] = json.dumps(data)


# Every check after "server" of a healthy whole preflight against herdr_answers(), rendered without symbols.
_REST = (
    "ok   session         acme serves organization acme\n"
    "ok   integrations    codex current (v6)\n"
    "ok   caller pane     w1:p1 in workspace w1, tab w1:t1: a shell, not an agent; controller target pinned to w1:p1\n"
    "ok   agents          none running\n"
    "ok   repo checkout   <tmp>/src/acme/widgets: primary checkout; default branch trunk (from origin/HEAD)\n"
    "ok   base ref        origin/main is {sha}\n"
    "ok   repo workspace  w1 \"widgets\" (the caller's workspace) serves <tmp>/src/acme/widgets\n"
    "ok   repo tab        w1:t1 is labelled \"widgets\"\n"
    "ok   run             1 worker registered as queued (concurrency 4); plan snapshot <tmp>/orch/runs/w1_p1-20261130T080000Z/plan.toml\n"
    "w1:p1-20261130T080000Z\n"
)


def test_an_unknown_newer_herdr_warns_and_proceeds_when_its_schema_has_every_method(tmp_path: Path, cloned: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    answers = herdr_answers(cloned)
    _release(answers, "1.0.0", 31)
    engine, _ = make_engine(tmp_path, answers)

    result = preflight(engine, plan)

    assert result.ok
    assert render_preflight(result, symbols=False).replace(str(tmp_path), "<tmp>") == (
        "ok   herdr env       HERDR_ENV=1\n"
        "ok   plan            acme/widgets, base origin/main, 1 worker (codex)\n"
        "ok   herdr           herdr 1.0.0 client, protocol 31\n"
        "                     note: herdr 1.0.0 (client) is not a version orch is tested against (0.7.5, 0.8.2, 0.9.1, 0.9.5); proceeding because its api schema has every method orch uses\n"
        "ok   capabilities    all 28 herdr commands the run uses are in herdr api schema\n"
        "ok   server          running herdr 1.0.0, protocol 31, compatible\n"
        "                     note: herdr 1.0.0 (server) is not a version orch is tested against (0.7.5, 0.8.2, 0.9.1, 0.9.5); proceeding because its api schema has every method orch uses\n"
        "ok   features        completion_seq for finished turns, shift+tab for plan mode, resume commands for claude, opencode and pi sessions\n"
        + _REST.format(sha=result.repo.base_sha if result.repo else "")
    )


def test_a_herdr_older_than_075_is_refused_with_the_reason(tmp_path: Path, cloned: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    answers = herdr_answers(cloned)
    _release(answers, "0.7.4", 17)
    engine, _ = make_engine(tmp_path, answers)

    result = preflight(engine, plan)

    assert render_preflight(result, symbols=False).splitlines()[2:] == ["FAIL herdr           herdr 0.7.4 client, protocol 17: older than 0.7.5"]
    assert result.failure is not None and (result.failure.reason, result.failure.hint) == (
        "this herdr is 0.7.4; orch needs herdr 0.7.5 or later",
        "install herdr 0.7.5, 0.8.2, 0.9.1 or 0.9.5, or point orch at it with `orch --herdr PATH` or ORCH_HERDR",
    )


def test_a_09_server_behind_a_newer_client_is_named_and_judged_by_itself(tmp_path: Path, cloned: Path) -> None:
    """herdr 0.9 negotiates capabilities: a compatible client and server may differ (../herdr-0.9.1/DELTA.md rows 11-12)."""
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    answers = herdr_answers(cloned)
    _release(answers, "0.9.3", 22, server="0.9.1")
    engine, _ = make_engine(tmp_path, answers)

    result = preflight(engine, plan)

    assert result.ok
    assert render_preflight(result, symbols=False).replace(str(tmp_path), "<tmp>") == (
        "ok   herdr env       HERDR_ENV=1\n"
        "ok   plan            acme/widgets, base origin/main, 1 worker (codex)\n"
        "ok   herdr           herdr 0.9.3 client, protocol 22\n"
        "ok   capabilities    all 28 herdr commands the run uses are in herdr api schema\n"
        "ok   server          running herdr 0.9.1, protocol 22, compatible\n"
        "                     note: the server (0.9.1) and this CLI (0.9.3) are different herdr versions; orch goes by the server's\n"
        "ok   features        agent state for finished turns (completion_seq needs 0.9.2), shift+tab for plan mode\n"
        + _REST.format(sha=result.repo.base_sha if result.repo else "")
    )


def test_082_row10_a_caller_herdr_resolves_elsewhere_stops_preflight(tmp_path: Path, cloned: Path) -> None:
    """herdr 0.7.5 resolves `pane current --current` to the UI-focused pane, 0.8.2 to the caller
    (../shared/herdr-0.8.2/DELTA.md row 10): orch pins HERDR_PANE_ID and stops when herdr names another pane."""
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    answers = herdr_answers(cloned)
    other = json.loads(pane("w1", str(cloned)).model_dump_json(exclude_none=True)) | {"pane_id": "w1:p2", "focused": True}
    answers[("pane", "current", "--current")] = envelope("cli:pane:current", {"type": "pane_current", "pane": other})
    engine, _ = make_engine(tmp_path, answers)

    result = preflight(engine, plan)

    assert render_preflight(result, symbols=False).splitlines()[-1] == "FAIL caller pane     herdr pane current --current is w1:p2, HERDR_PANE_ID is w1:p1"
    assert result.failure is not None and (result.failure.reason, result.failure.hint) == (
        "herdr resolved the caller to pane w1:p2, not HERDR_PANE_ID w1:p1",
        "the pane may have moved to another workspace; run orch from a fresh pane",
    )


def test_09_row16_orch_goes_by_herdr_env_not_term_program(tmp_path: Path) -> None:
    """herdr 0.9 panes get TERM_PROGRAM=herdr (../shared/herdr-0.9.1/DELTA.md row 16); orch knows it is inside herdr
    by HERDR_ENV=1 alone, on every release."""
    engine, runner = make_engine(tmp_path, {}, env={"TERM_PROGRAM": "herdr", "TERM_PROGRAM_VERSION": "0.9.1"})

    result = preflight(engine, tmp_path / "missing.toml")

    assert (render_preflight(result, symbols=False), runner.argvs) == ("FAIL herdr env       HERDR_ENV is unset\n", [])


def test_outside_herdr_runs_no_herdr_command(tmp_path: Path) -> None:
    engine, runner = make_engine(tmp_path, {}, env={})

    result = preflight(engine, tmp_path / "missing.toml")

    assert (render_preflight(result, symbols=False), runner.argvs, result.failure is not None and result.failure.check) == (
        "FAIL herdr env       HERDR_ENV is unset\n",
        [],
        "herdr env",
    )


def test_missing_herdr_names_the_binary_and_the_option(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    engine, _ = make_engine(tmp_path, {("--version",): FileNotFoundError(2, "No such file or directory")})

    result = preflight(engine, plan)

    assert result.failure is not None
    assert (result.checks[-1].evidence, result.failure.reason, result.failure.hint) == (
        "cannot run herdr",
        "herdr is not available: herdr --version: cannot execute 'herdr' (No such file or directory)",
        "install herdr 0.7.5, 0.8.2, 0.9.1 or 0.9.5, or point orch at it with `orch --herdr PATH` or ORCH_HERDR",
    )
    assert engine.ledger.list_runs() == []


def test_capabilities_fall_back_to_help_when_api_schema_is_unavailable(tmp_path: Path, cloned: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    answers = herdr_answers(cloned)
    answers[("api", "schema", "--json")] = (2, "", "unknown command: api\nrun 'herdr --help' for usage\n")
    answers[("--help",)] = "".join(f"       herdr {g} <subcommand> ...\n" for g in ("workspace", "worktree", "tab", "agent"))

    result = preflight(engine := make_engine(tmp_path, answers)[0], plan)

    assert result.failure is not None and engine.ledger.list_runs() == []
    assert (result.checks[-1].name, result.checks[-1].evidence, result.failure.reason) == (
        "capabilities",
        "no api schema (HerdrUsageError); herdr --help lacks: pane",
        "this herdr lacks command groups the run needs: pane",
    )


def test_server_not_running_stops_before_the_session_check(tmp_path: Path, cloned: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    answers = herdr_answers(cloned)
    answers[("status", "--json")] = (DATA / "status_not_running.json").read_text()
    engine, runner = make_engine(tmp_path, answers)

    result = preflight(engine, plan)

    assert result.failure is not None
    assert (render_preflight(result, symbols=False).splitlines()[-1], result.failure.hint) == (
        "FAIL server          not running",
        "start herdr from a shell outside herdr, then run orch from one of its panes",
    )
    assert ("session", "list", "--json") not in runner.argvs


def test_a_failure_after_the_run_exists_keeps_the_run_interrupted_with_what_it_created(tmp_path: Path, cloned: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    answers = herdr_answers(cloned)
    tabs = json.loads(str(answers[("tab", "list", "--workspace", "w1")]))
    tabs["result"]["tabs"][0]["label"] = "1"
    answers[("tab", "list", "--workspace", "w1")] = json.dumps(tabs)
    answers[("tab", "rename", "w1:t1", "widgets")] = (1, "", '{"id":"cli:tab:rename","error":{"code":"tab_not_found","message":"tab w1:t1 not found"}}\n')
    engine, _ = make_engine(tmp_path, answers)

    result = preflight(engine, plan)

    assert result.failure is not None
    assert (result.checks[-1].name, result.failure.reason, result.failure.hint, result.run_id) == (
        "repo tab",
        "herdr tab rename: tab_not_found: tab w1:t1 not found",
        "run w1:p1-20261130T080000Z records what preflight created; re-run `orch preflight PLAN` for a new run",
        "w1:p1-20261130T080000Z",
    )
    run = engine.ledger.get_run("w1:p1-20261130T080000Z")
    assert (run.status, run.stopped_at) == ("interrupted", "preflight: repo tab")
    assert [(e.kind, e.status, e.error) for e in engine.ledger.list_effects(run.run_id)] == [
        ("tab_rename", "failed", "herdr tab rename: tab_not_found: tab w1:t1 not found")
    ]


def test_095_preflight_names_the_features_orch_uses_on_each_release() -> None:
    """The `features` row: what orch uses of the server's release (../herdr-0.9.5/DELTA.md: completion_seq from 0.9.2;
    0.9.1 DELTA row 6: --trust-repository from 0.9.0, only where the plan's policy verified the repository)."""
    from orchestrator.herdr import features_of
    from orchestrator.preflight import feature_summary

    rows = [(v, trust, feature_summary(features_of(v), trust_repository=trust)) for v in ("0.7.5", "0.8.2", "0.9.1", "0.9.5") for trust in (False, True)]
    assert rows == [
        ("0.7.5", False, "agent state for finished turns (completion_seq needs 0.9.2), no plan-first (shift+tab needs 0.8.2)"),
        ("0.7.5", True, "agent state for finished turns (completion_seq needs 0.9.2), no plan-first (shift+tab needs 0.8.2), no --trust-repository (needs 0.9.0; the policy asks for it)"),
        ("0.8.2", False, "agent state for finished turns (completion_seq needs 0.9.2), shift+tab for plan mode, a 0.3 s wait for each prompt's Enter"),
        ("0.8.2", True, "agent state for finished turns (completion_seq needs 0.9.2), shift+tab for plan mode, a 0.3 s wait for each prompt's Enter, no --trust-repository (needs 0.9.0; the policy asks for it)"),
        ("0.9.1", False, "agent state for finished turns (completion_seq needs 0.9.2), shift+tab for plan mode"),
        ("0.9.1", True, "agent state for finished turns (completion_seq needs 0.9.2), shift+tab for plan mode, --trust-repository on worktree commands (policy)"),
        ("0.9.5", False, "completion_seq for finished turns, shift+tab for plan mode, resume commands for claude, opencode and pi sessions"),
        ("0.9.5", True, "completion_seq for finished turns, shift+tab for plan mode, resume commands for claude, opencode and pi sessions, --trust-repository on worktree commands (policy)"),
    ]
