"""`orch plan check|schema` through the real click group: whole outputs pinned by golden files."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner, Result

from orchestrator.cli import cli
from orchestrator.config import read_toml

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture
def orch(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """A runner whose checkouts live under /src, so printed paths do not depend on the test's HOME."""
    monkeypatch.setenv("ORCH_SRC_ROOT", "/src")
    return CliRunner()


def run(runner: CliRunner, cwd: Path, *args: str) -> Result:
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(cli, list(args))
    finally:
        os.chdir(previous)


def test_check_example_plan(orch: CliRunner, golden: Callable[[str, str], None]) -> None:
    result = run(orch, ROOT, "plan", "check", "examples/plan.toml")
    assert (result.exit_code, result.stderr) == (0, "")
    golden("plan_check_example.txt", result.stdout)


def test_check_example_plan_fits_an_80_column_terminal(orch: CliRunner, monkeypatch: pytest.MonkeyPatch, golden: Callable[[str, str], None]) -> None:
    # Issue 23: the resolved-plan table was 252 columns wide whatever COLUMNS said; now it is one block per worker.
    monkeypatch.setenv("COLUMNS", "80")
    result = run(orch, ROOT, "plan", "check", "examples/plan.toml")
    assert (result.exit_code, result.stderr) == (0, "")
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    golden("plan_check_example_80_columns.txt", result.stdout)


def test_check_example_plan_json(orch: CliRunner, golden: Callable[[str, str], None]) -> None:
    result = run(orch, ROOT, "plan", "check", "examples/plan.toml", "--json")
    assert (result.exit_code, result.stderr) == (0, "")
    golden("plan_check_example.json", result.stdout)
    assert json.loads(result.stdout)["workers"][1]["placement"] == "sibling"


def test_check_plan_with_hosts_shows_each_workers_host(orch: CliRunner, golden: Callable[[str, str], None]) -> None:
    # The hosts table and a host column appear only in a plan that names hosts (test_check_example_plan: none).
    result = run(orch, GOLDEN, "plan", "check", "hosts.toml")
    assert (result.exit_code, result.stderr) == (0, "")
    golden("plan_check_hosts.txt", result.stdout)
    result = run(orch, GOLDEN, "plan", "check", "hosts.toml", "--json")
    assert (result.exit_code, result.stderr) == (0, "")
    golden("plan_check_hosts.json", result.stdout)
    result = run(orch, GOLDEN, "plan", "check", "hosts.toml", "--commands")
    assert (result.exit_code, result.stderr) == (0, "")
    golden("plan_check_hosts_commands.txt", result.stdout)


def test_check_plan_with_after_across_hosts_lists_the_commit_sent_to_the_dependants_host(orch: CliRunner, golden: Callable[[str, str], None]) -> None:
    # ui on the build box starts from the integration branch: its commit is pushed into orch's ref of the box's
    # checkout and read back there before the worktree is made from it; docs on the controller starts from it at home.
    result = run(orch, GOLDEN, "plan", "check", "hosts_after.toml", "--commands")
    assert (result.exit_code, result.stderr) == (0, "")
    golden("plan_check_hosts_after_commands.txt", result.stdout)


@pytest.mark.parametrize("name", ["broken_placement", "broken_structure", "broken_syntax", "missing", "broken_hosts"])
def test_check_broken_plan_prints_one_line_per_problem(orch: CliRunner, name: str, golden: Callable[[str, str], None]) -> None:
    result = run(orch, GOLDEN, "plan", "check", f"{name}.toml")
    assert (result.exit_code, result.stdout) == (1, "")
    golden(f"plan_check_{name}.txt", result.stderr)


def test_check_shows_where_policy_values_come_from(orch: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, golden: Callable[[str, str], None]) -> None:
    monkeypatch.setenv("ORCH_POLICY_DIR", str(tmp_path))
    (tmp_path / "acme.toml").write_text('applies_to = "/src/acme"\nextra_branch_types = ["hotfix"]\ndescription_pattern = "[a-z]+(-[a-z]+)*"\n')
    (tmp_path / "acme-widgets.toml").write_text('applies_to = "/src/acme/widgets"\ndefault_kind = "claude"\n')
    result = run(orch, ROOT, "plan", "check", "examples/plan.toml")
    assert (result.exit_code, result.stderr) == (0, "")
    golden("plan_check_overlays.txt", result.stdout)


def test_bad_overlay_names_its_file(orch: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ORCH_POLICY_DIR", str(tmp_path))
    (tmp_path / "acme.toml").write_text('applies_to = "/src/acme"\nallowed_kinds = []\n')
    result = run(orch, ROOT, "plan", "check", "examples/plan.toml")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"orch: {tmp_path}/acme.toml: allowed_kinds: must not be empty\n")


def test_schema_is_json_schema_that_accepts_the_example(orch: CliRunner, golden: Callable[[str, str], None]) -> None:
    result = run(orch, ROOT, "plan", "schema")
    assert (result.exit_code, result.stderr) == (0, "")
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(read_toml(ROOT / "examples" / "plan.toml", "plan.toml"), schema)
    golden("plan_schema.json", result.stdout)


def test_check_prints_warnings_under_the_verdict(orch: CliRunner, tmp_path: Path) -> None:
    plan = (ROOT / "examples" / "plan.toml").read_text().replace("concurrency = 2", "concurrency = 5")
    (tmp_path / "plan.toml").write_text(plan)
    result = run(orch, tmp_path, "plan", "check", "plan.toml")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[:3] == [
        "plan plan.toml: valid, 3 workers",
        "warning: plan.toml: defaults.concurrency: 5 is more than the 3 workers of this plan; at most 3 run at once",
        "",
    ]
    as_json = run(orch, tmp_path, "plan", "check", "plan.toml", "--json")
    assert json.loads(as_json.stdout)["warnings"] == ["plan.toml: defaults.concurrency: 5 is more than the 3 workers of this plan; at most 3 run at once"]


ONE = 'organization = "acme"\nrepo = "widgets"\nbase = "main"\n\n[[workers]]\ntask = "a"\nobjective = "x"\ndeliverable = "y"\nbranch = "feat/a"\n'


def test_plan_check_speaks_in_peoples_words(orch: CliRunner, tmp_path: Path, golden: Callable[[str, str], None]) -> None:
    """Issue 23: `claim: must be a valid tuple`, `Illegal character '\\n'` and `valid, 1 workers` were library words."""
    (tmp_path / "shape.toml").write_text(ONE + 'claim = "src/"\n')
    (tmp_path / "newline.toml").write_text(ONE.replace('objective = "x"', 'objective = "x\nmore"'))
    (tmp_path / "one.toml").write_text(ONE + 'claim = ["src/"]\nverify = ["true"]\n')

    shape, newline, one = (run(orch, tmp_path, "plan", "check", f"{name}.toml") for name in ("shape", "newline", "one"))

    assert (shape.exit_code, shape.stdout, shape.stderr) == (1, "", 'orch: shape.toml:10: workers[0] (a).claim: must be a list, like ["a", "b"], got "src/"\n')
    assert (newline.exit_code, newline.stdout, newline.stderr) == (
        1, "", "orch: newline.toml:7:15: invalid TOML: a line ends inside a quoted string (is a closing quote missing?)\n")
    assert (one.exit_code, one.stderr) == (0, "")
    golden("plan_check_one_worker.txt", one.stdout)  # "valid, 1 worker"
