"""Bad input through the real CLI: one `orch:` line (+ hint), the documented exit code, the ledger unchanged."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from registry import Ledger, WorkerState

S = WorkerState
RUN = "w1:p1-20260101T000000Z"
PLAN = """
organization = "acme"
repo = "widgets"
base = "main"

[[workers]]
task = "{task}"
objective = "Do {task}."
deliverable = "{task} committed."
branch = "feat/{task}"
claim = ["{task}/"]
verify = ["true"]
"""
# How each worker of the run got where it stands: its transitions from provisioning (ready records its pane).
WORKERS = {
    "busy": [S.READY, S.DISPATCHED, S.WORKING],
    "done": [S.READY, S.DISPATCHED, S.WORKING, S.RESULT, S.VERIFYING, S.ACCEPTED],
    "fresh": [],
}


def _ledger_dump(path: Path) -> list[str]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ORCH_HOME with one active run (workers busy, done, fresh) and its plan snapshot; inside a herdr pane."""
    orch_home = tmp_path / "orch-home"
    for key, value in {"ORCH_HOME": str(orch_home), "ORCH_SRC_ROOT": str(tmp_path / "src"), "HERDR_ENV": "1",
                       "HERDR_PANE_ID": "w1:p1", "ORCH_HERDR": "/nonexistent/herdr"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    snapshot = orch_home / "runs" / RUN.replace(":", "_") / "plan.toml"
    snapshot.parent.mkdir(parents=True)
    text = PLAN.format(task="busy")
    for task in ("done", "fresh"):
        text += "\n[[workers]]" + PLAN.format(task=task).split("[[workers]]")[1]
    snapshot.write_text(text)
    (tmp_path / "typo.toml").write_text(PLAN.format(task="busy").replace("objective", "objectve"))
    (tmp_path / "valid.toml").write_text(PLAN.format(task="busy"))  # its checkout ({tmp}/src/acme/widgets) does not exist
    ledger = Ledger.open(orch_home / "ledger.sqlite3")
    ledger.create_run(RUN, controller_target="w1:p1", session="acme", organization="acme", repo="widgets", plan_path=snapshot)
    for task, path in WORKERS.items():
        ledger.add_worker(RUN, task, name=task, kind="codex", objective=f"Do {task}.")
        state = S.PROVISIONING
        for new in path:
            changes = {"pane_id": f"w1:p-{task}"} if new is S.READY else {}
            ledger.transition(RUN, task, state, new, cause={"test": "setup"}, **changes)
            state = new
    ledger.close()
    return tmp_path


CASES = {
    "plan file missing": (
        ["preflight", "{tmp}/nope.toml"], 1,
        "orch: {tmp}/nope.toml: no such file\nhint: `orch plan check {tmp}/nope.toml` shows every problem\n",
    ),
    "plan file missing, doctor": (
        ["doctor", "{tmp}/nope.toml"], 1,
        "orch: {tmp}/nope.toml: no such file\nhint: `orch plan check {tmp}/nope.toml` shows every problem\n",
    ),
    "plan with a typo": (
        ["plan", "check", "{tmp}/typo.toml", "--json"], 1,
        "orch: {tmp}/typo.toml:6: workers[0] (busy).objective: is required\n"
        "orch: {tmp}/typo.toml:8: workers[0] (busy).objectve: is not a known field; did you mean `objective`?\n",
    ),
    "unknown run": (
        ["status", "--run", "nope", "--json"], 1,
        # The caller used --json: the command a hint prints carries it too (one exact form per step).
        "orch: no run nope in {tmp}/orch-home/ledger.sqlite3\nhint: `orch status --all --json` lists the runs\n",
    ),
    "unknown run, report": (
        ["report", "--run", "nope"], 1,
        "orch: no run nope in {tmp}/orch-home/ledger.sqlite3\nhint: `orch status --all` lists the runs\n",
    ),
    "unknown task, answer": (["answer", "--run", RUN, "nope", "yes"], 1, f"orch: no worker nope in run {RUN}\n"),
    "answer to a worker that asked nothing": (
        ["answer", "--run", RUN, "busy", "yes"], 1,
        "orch: worker busy asked nothing to answer (state working)\n"
        f"hint: `orch answer` replies to a pending question or block; `orch send --run {RUN} busy --kind follow-up -- TEXT` sends new instructions\n",
    ),
    "stop to a finished worker": (
        ["send", "--run", RUN, "done", "--kind", "stop", "Stop."], 1,
        "orch: worker done is finished (state accepted); a stop would reach no task of this run\n"
        f"hint: `orch status --run {RUN}` shows its disposition; give new work to a new run\n",
    ),
    "follow-up to an unprovisioned worker": (
        ["send", "--run", RUN, "fresh", "--kind", "follow-up", "More."], 1,
        "orch: worker fresh has no reply target yet (state provisioning)\n",
    ),
    "inbox add with empty stdin": (
        ["inbox", "add", "--run", RUN, "-"], 1,
        "orch: the message is empty\nhint: pass the envelope as TEXT, or pipe it in: `orch inbox add --run RUN_ID - < callback.txt`\n",
    ),
    "verify an unknown task": (["verify", "--run", RUN, "--task", "nope"], 1, f"orch: run {RUN} has no task nope\n"),
    "retire keeping an unknown task": (
        ["retire", "--run", RUN, "--keep", "nope"], 1,
        f"orch: run {RUN} has no task nope\nhint: `orch status --run {RUN}` lists the run's tasks\n",
    ),
    "outside herdr": (
        ["preflight", "{tmp}/typo.toml"], 1,
        "orch: this agent is outside herdr (HERDR_ENV is not 1); stop: orch orchestrates only from a herdr pane\n"
        "hint: run orch from a shell or agent inside a herdr pane\n",
    ),
    "herdr missing, doctor: herdr is named before the missing checkout": (
        ["doctor", "{tmp}/valid.toml"], 3,
        "orch: herdr integration status: cannot execute '/nonexistent/herdr' (No such file or directory)\n"
        "hint: install herdr 0.7.5, 0.8.2, 0.9.1 or 0.9.5, or point orch at it with `orch --herdr PATH` or ORCH_HERDR\n",
    ),
    "herdr missing, observe": (
        ["observe", "--run", RUN, "--once"], 3,
        "orch: herdr agent list: cannot execute '/nonexistent/herdr' (No such file or directory)\n"
        "hint: install herdr 0.7.5, 0.8.2, 0.9.1 or 0.9.5, or point orch at it with `orch --herdr PATH` or ORCH_HERDR\n",
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_bad_input_is_one_clear_line_its_exit_code_and_no_change(home: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    argv, code, stderr = CASES[name]
    if name == "outside herdr":
        monkeypatch.delenv("HERDR_ENV")
    ledger = home / "orch-home" / "ledger.sqlite3"
    before = _ledger_dump(ledger)
    done = CliRunner().invoke(cli, [arg.format(tmp=home) for arg in argv], input="", prog_name="orch")
    assert (done.exit_code, done.stderr) == (code, stderr.format(tmp=home)), (done.stdout, done.exception)
    assert "Traceback" not in done.output and "validation error" not in done.output
    assert _ledger_dump(ledger) == before


def test_preflight_with_herdr_missing_exits_3_like_every_command(home: Path) -> None:
    plan = home / "plan.toml"
    plan.write_text(PLAN.format(task="busy"))
    before = _ledger_dump(home / "orch-home" / "ledger.sqlite3")
    done = CliRunner().invoke(cli, ["preflight", str(plan)], prog_name="orch")
    assert (done.exit_code, done.stderr) == (
        3,
        "orch: herdr is not available: herdr --version: cannot execute '/nonexistent/herdr' (No such file or directory)\n"
        "hint: install herdr 0.7.5, 0.8.2, 0.9.1 or 0.9.5, or point orch at it with `orch --herdr PATH` or ORCH_HERDR\n",
    )
    assert _ledger_dump(home / "orch-home" / "ledger.sqlite3") == before


def test_preflight_json_failure_has_no_next_step_and_its_hint_in_the_callers_form(home: Path) -> None:
    # Nothing was created, so nothing follows but the hint (then preflight again); its command carries --json.
    done = CliRunner().invoke(cli, ["preflight", str(home / "nope.toml"), "--json"], prog_name="orch")
    reason = f"{home}/nope.toml: no such file"
    assert (done.exit_code, json.loads(done.stdout)) == (1, {
        "ok": False, "run_id": None, "controller": None, "repo": None,
        "checks": [{"name": "herdr env", "ok": True, "evidence": "HERDR_ENV=1", "notes": []},
                   {"name": "plan", "ok": False, "evidence": reason, "notes": []}],
        "failure": {"check": "plan", "reason": reason, "hint": f"`orch plan check {home}/nope.toml --json` shows every problem", "exit_code": 1},
        "next": [],
    })  # fmt: skip


def test_status_and_report_on_an_empty_ledger_say_how_to_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "orch-home"))
    ledger = tmp_path / "orch-home" / "ledger.sqlite3"
    hint = "start one with `orch run PLAN` (step by step: `orch preflight PLAN`)"
    failure = {"ok": False, "error": "OrchError", "reason": f"no run in {ledger}", "problems": [f"no run in {ledger}"], "hint": hint, "exit_code": 1}
    flagged = "start one with `orch run PLAN --json` (step by step: `orch preflight PLAN --json`)"
    for command in (["status"], ["status", "--json"], ["report"]):
        done = CliRunner().invoke(cli, command, prog_name="orch")
        said = flagged if "--json" in command else hint
        stdout = json.dumps({**failure, "hint": said}, indent=2) + "\n" if "--json" in command else ""
        assert (done.exit_code, done.stdout, done.stderr) == (1, stdout, f"orch: no run in {ledger}\nhint: {said}\n"), command
    listed = CliRunner().invoke(cli, ["status", "--all"], prog_name="orch")
    assert (listed.exit_code, listed.stdout) == (0, "no runs\n")


# One failing command line per command with --json (a new command must add its own): stdout is then one JSON document.
JSON_FAILURES = {
    "answer": (["answer", "--run", RUN, "nope", "yes"], 1),
    "approve": (["approve", "--run", RUN, "nope"], 1),
    "cancel": (["cancel", "nope"], 1),
    "demo": (["demo", "--no-such-option"], 2),
    "dispatch": (["dispatch", "--run", "nope"], 1),
    "doctor": (["doctor", "{tmp}/nope.toml"], 1),
    "finish": (["finish", "--run", "nope"], 1),
    "inbox ack": (["inbox", "ack"], 2),  # (the controller's own calls over ssh: only a usage error is theirs to fail)
    "inbox add": (["inbox", "add", "--run", RUN], 1),
    "inbox list": (["inbox", "list", "--run", "nope"], 1),
    "inbox report": (["inbox", "report", "/x.md"], 2),  # (no --root: the controller's own call over ssh)
    "inbox spooled": (["inbox", "spooled"], 2),
    "integrate": (["integrate", "--run", "nope"], 1),
    "observe": (["observe", "--run", RUN, "--once"], 3),
    "packet show": (["packet", "show", "nope", "--run", "nope"], 1),
    "plan check": (["plan", "check", "{tmp}/nope.toml"], 1),
    "preflight": (["preflight", "{tmp}/nope.toml"], 1),
    "provision": (["provision", "--run", "nope"], 1),
    "report": (["report", "--run", "nope"], 1),
    "resume": (["resume", "nope"], 1),
    "retire": (["retire", "--run", RUN, "--keep", "nope"], 1),
    "run": (["run", "{tmp}/nope.toml"], 1),
    "send": (["send", "--run", RUN, "done", "--kind", "stop", "Stop."], 1),
    "status": (["status", "--run", "nope"], 1),
    "verify": (["verify", "--run", RUN, "--task", "nope"], 1),
    "wait": (["wait", "--run", "nope"], 1),
}


def _json_leaves() -> set[str]:
    import click

    ctx = click.Context(cli)
    leaves = set()
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        subs = command.commands.items() if isinstance(command, click.Group) else [("", command)]
        for sub_name, sub in subs:
            if any("--json" in getattr(param, "opts", []) for param in sub.params):
                leaves.add(f"{name} {sub_name}".strip())
    return leaves


def test_every_json_command_has_a_failure_case() -> None:
    assert sorted(_json_leaves()) == sorted(JSON_FAILURES)


@pytest.mark.parametrize("name", JSON_FAILURES)
def test_every_command_prints_json_on_stdout_when_it_fails_under_json(home: Path, name: str) -> None:
    argv, code = JSON_FAILURES[name]
    done = CliRunner().invoke(cli, [*(arg.format(tmp=home) for arg in argv), "--json"], input="", prog_name="orch")
    assert done.exit_code == code, (done.stdout, done.stderr, done.exception)
    doc = json.loads(done.stdout)
    assert doc["ok"] is False
    # preflight's failure is part of its checklist result; every other command prints the failure document.
    failure = doc["failure"] if name == "preflight" else doc
    assert failure["exit_code"] == code
    assert failure["reason"] and failure["reason"] in done.stderr, done.stderr
    assert "hint" in failure


def test_a_usage_error_under_json_is_a_json_document_with_exit_2(home: Path) -> None:
    done = CliRunner().invoke(cli, ["status", "--json", "--bogus"], prog_name="orch")
    assert done.exit_code == 2
    doc = json.loads(done.stdout)
    reason = doc.pop("reason")  # click's own wording, which changes between click versions
    assert "--bogus" in reason and reason in done.stderr
    assert doc == {"ok": False, "error": "UsageError", "problems": [reason], "hint": "`orch status --help` shows the usage", "exit_code": 2}


def test_json_failure_from_the_installed_orch_fills_the_redirected_file(home: Path) -> None:
    import shutil
    import subprocess

    orch = shutil.which("orch")
    assert orch is not None
    out = home / "outcome.json"
    with out.open("w") as stdout:
        done = subprocess.run([orch, "run", str(home / "nope.toml"), "--json"], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert json.loads(out.read_text())["exit_code"] == 1


def test_run_outside_herdr_speaks_to_a_person_and_reports_a_missing_plan_first(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HERDR_ENV")
    (home / "plan.toml").write_text(PLAN.format(task="busy"))
    before = _ledger_dump(home / "orch-home" / "ledger.sqlite3")
    missing = CliRunner().invoke(cli, ["run", str(home / "nope.toml")], prog_name="orch")
    assert (missing.exit_code, missing.stderr) == (1, f"orch: {home}/nope.toml: no such file\n")
    outside = CliRunner().invoke(cli, ["run", str(home / "plan.toml")], prog_name="orch")
    assert (outside.exit_code, outside.stderr) == (
        1,
        "orch: orch run works only inside herdr, and this shell is not in a herdr pane (HERDR_ENV is not 1)\n"
        "hint: start herdr, then run `orch run PLAN` from a shell in one of its panes; `orch demo` shows a whole run without herdr\n",
    )
    assert _ledger_dump(home / "orch-home" / "ledger.sqlite3") == before
