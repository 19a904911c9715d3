"""`orch plan check --commands`: the example plan's whole command listing is pinned, and every herdr command in it is
a form herdr 0.7.5 accepts (the argv contract test's checks: a row of its table, and the simulator's parser)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from herdr_sim import cli as sim
from orchestrator.cli import cli
from orchestrator.config import Settings
from orchestrator.dryrun import plan_commands
from orchestrator.plan import load_plan
from tests.orchestrator.test_herdr_argv_contract import FORMS, LOCAL, NO_SERVER

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plan.toml"


@pytest.fixture
def src_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkouts under /src, so printed paths do not depend on the test's HOME."""
    monkeypatch.setenv("ORCH_SRC_ROOT", "/src")


def test_the_example_plans_commands_are_pinned(src_root: None, golden: Callable[[str, str], None], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["plan", "check", "examples/plan.toml", "--commands"])
    assert (result.exit_code, result.stderr) == (0, "")
    golden("plan_commands_example.txt", result.stdout)


def test_the_json_listing_has_one_entry_per_command(src_root: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["plan", "check", "examples/plan.toml", "--commands", "--json"])
    listed = json.loads(result.stdout)["commands"]
    assert [(c["tool"], c["argv"][:2]) for c in listed[:3]] == [("herdr", ["--version"]), ("herdr", ["api", "schema"]), ("herdr", ["status", "--json"])]
    assert len(listed) == len([c for c in plan_commands(load_plan(EXAMPLE, Settings.from_env())) if c.tool != "#"])


def _shape(argv: list[str], known: list[list[str]]) -> bool:
    """Same words as a contract row wherever the row has a flag or a subcommand word; values may differ."""
    for row in known:
        if len(row) == len(argv) and all(a == b or not b.startswith("-") and not a.startswith("-") and i >= _path_len(row) for i, (a, b) in enumerate(zip(argv, row, strict=True))):
            return True
    return False


def _path_len(row: list[str]) -> int:
    # The command path: the leading words before the first id, value or flag (e.g. "agent start", "pane list").
    groups = {"workspace", "tab", "pane", "agent", "worktree", "session", "integration", "api", "status"}
    return 2 if row and row[0] in groups and len(row) > 1 and not row[1].startswith("-") else 1


HERDR_COMMANDS = [list(c.argv) for c in plan_commands(load_plan(EXAMPLE, Settings.from_env())) if c.tool == "herdr"]


@pytest.mark.parametrize("argv", HERDR_COMMANDS, ids=[" ".join(a) for a in HERDR_COMMANDS])
def test_every_herdr_command_of_the_listing_is_a_contract_form(argv: list[str]) -> None:
    assert _shape(argv, [row[2] for row in FORMS]), f"{argv} matches no row of tests/orchestrator/test_herdr_argv_contract.py FORMS"


@pytest.mark.parametrize("argv", HERDR_COMMANDS, ids=[" ".join(a) for a in HERDR_COMMANDS])
def test_the_simulator_parses_every_herdr_command_of_the_listing(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("HERDR_SOCKET_PATH", "HERDR_SESSION", "HERDR_PANE_ID", "HERDR_SIM_INTEGRATIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HERDR_SIM_HOME", str(tmp_path / "sim"))
    monkeypatch.setenv("HERDR_SIM_VERSION", "0.7.5")  # NO_SERVER is 0.7.5's text (the argv contract test plays each release)
    code = sim.main(argv)
    captured = capsys.readouterr()
    form = next((row[0] for row in FORMS if row[2] == argv), None)
    if form in LOCAL:
        assert code == 0, argv
    else:
        assert (code, captured.out, captured.err) == (1, "", NO_SERVER), argv
