"""Preflight of a plan's other hosts (issue 26): each checked through `herdr --machine` and ssh, the failing one named,
and a plan that puts workers there refused whole before anything is created."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator.preflight import preflight, render_preflight
from tests.orchestrator.test_preflight import _release, herdr_answers, make_engine


@pytest.fixture
def cloned(tmp_path: Path, git_repo_factory: Callable[[Path], Any]) -> Path:
    """The controller's checkout <src>/acme/widgets, a clone with origin/main (as test_preflight's)."""
    upstream = git_repo_factory(tmp_path / "upstream")
    upstream.git("branch", "-m", "trunk")
    checkout = tmp_path / "src" / "acme" / "widgets"
    subprocess.run(["git", "clone", "--quiet", str(upstream.path), str(checkout)], check=True, timeout=30)
    subprocess.run(["git", "-C", str(checkout), "update-ref", "refs/remotes/origin/main", "origin/trunk"], check=True, timeout=30)
    return checkout

HOSTS = """
[hosts.buildbox]
machine = "buildbox"
ssh = "me@buildbox.lan"
checkout = "/home/me/src/acme/widgets"
orch = "/opt/orch/bin/orch"
"""


def plan_text(host: str | None) -> str:
    return f"""
organization = "acme"
repo = "widgets"
base = "origin/main"
{HOSTS}
[[workers]]
task = "api-pagination"
objective = "Add cursor pagination."
deliverable = "Commits."
branch = "feat/api-pagination"
claim = ["src/**"]
verify = ["make test"]
{f'host = "{host}"' if host else ""}
"""


class ScriptedSsh:
    """The remote runner seam: answers each ssh call by the remote command string it carries, records them all."""

    def __init__(self, answers: dict[str, tuple[int, str, str]]) -> None:
        self.answers = answers
        self.commands: list[str] = []

    def __call__(self, argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        assert list(argv[:7]) == ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "me@buildbox.lan"] and argv[7] == "--"
        command = argv[8]
        self.commands.append(command)
        rc, out, err = self.answers[command]
        return subprocess.CompletedProcess(list(argv), rc, out, err)


def healthy_ssh(sha: str) -> dict[str, tuple[int, str, str]]:
    return {
        "herdr integration status": (0, "codex: current (v6) (/home/me/.codex/herdr-agent-state.sh)\n", ""),
        "command -v codex": (0, "/usr/local/bin/codex\n", ""),
        f"git -C /home/me/src/acme/widgets rev-parse --verify --quiet '{sha}^{{commit}}'": (0, f"{sha}\n", ""),
        "/opt/orch/bin/orch --version": (0, "orch 0.1.0\n", ""),
    }


def machine_answers(answers: dict[tuple[str, ...], Any], *, reachable: bool = True, session: str = "acme") -> None:
    answers[("machine", "status", "buildbox", "--json")] = json.dumps({"machines": [{"id": "m-7f3a", "label": "buildbox", "reachable": reachable}]})
    answers[("--machine", "buildbox", "status", "server", "--json")] = json.dumps(
        {"status": "running", "running": True, "version": "0.9.5", "protocol": 22, "compatible": True, "socket": "/r/herdr.sock", "session": session}
    )


def base_sha(checkout: Path) -> str:
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "origin/main"], capture_output=True, text=True, check=True).stdout.strip()


def run_preflight(tmp_path: Path, cloned: Path, host: str | None, *, ssh: dict[str, tuple[int, str, str]] | None = None, **machine: Any) -> tuple[Any, Any, ScriptedSsh, str]:
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text(host))
    answers = herdr_answers(cloned)
    _release(answers, "0.9.5", 22)
    machine_answers(answers, **machine)
    engine, runner = make_engine(tmp_path, answers)
    sha = base_sha(cloned)
    scripted = ScriptedSsh(ssh if ssh is not None else healthy_ssh(sha))
    engine.remote_runner = scripted
    result = preflight(engine, plan)
    text = render_preflight(result, symbols=False).replace(str(tmp_path), "<tmp>").replace(sha, "<sha>").replace(sha[:12], "<sha12>")
    return result, engine, scripted, text


_HEAD = (
    "ok   herdr env       HERDR_ENV=1\n"
    "ok   plan            acme/widgets, base origin/main, 1 worker (codex)\n"
    "ok   herdr           herdr 0.9.5 client, protocol 22\n"
    "ok   capabilities    all 28 herdr commands the run uses are in herdr api schema\n"
    "ok   server          running herdr 0.9.5, protocol 22, compatible\n"
    "ok   features        completion_seq for finished turns, shift+tab for plan mode, resume commands for claude, opencode and pi sessions\n"
    "ok   session         acme serves organization acme\n"
    "ok   integrations    codex current (v6)\n"
    "ok   caller pane     w1:p1 in workspace w1, tab w1:t1: a shell, not an agent; controller target pinned to w1:p1\n"
    "ok   agents          none running\n"
    "ok   repo checkout   <tmp>/src/acme/widgets: primary checkout; default branch trunk (from origin/HEAD)\n"
    "ok   base ref        origin/main is <sha>\n"
)
_READY = (
    "buildbox: saved machine buildbox reachable, herdr 0.9.5 in session acme, integrations codex current (v6), codex installed, "
    "checkout /home/me/src/acme/widgets has the base, orch 0.1.0"
)


def test_a_plan_with_a_remote_worker_checks_every_host_then_records_the_worker_on_its_host(tmp_path: Path, cloned: Path) -> None:
    result, engine, ssh, text = run_preflight(tmp_path, cloned, "buildbox")

    assert result.ok, text
    assert text.splitlines()[12:14] == ["ok   hosts           1 host ready: api-pagination on buildbox", f"                     note: {_READY}"]
    assert result.run_id is not None
    assert [(w.task_label, w.host) for w in engine.ledger.list_workers(result.run_id)] == [("api-pagination", "buildbox")]
    assert ssh.commands == list(healthy_ssh(base_sha(cloned)))
    machine_calls = [words for words in engine.herdr.runner.argvs if "machine" in " ".join(words)]
    assert machine_calls == [("machine", "status", "buildbox", "--json"), ("--machine", "buildbox", "status", "server", "--json")]


def test_a_host_no_worker_uses_is_checked_and_the_run_goes_on(tmp_path: Path, cloned: Path) -> None:
    result, engine, _, text = run_preflight(tmp_path, cloned, None)

    assert result.ok, text
    assert text.splitlines()[12:14] == ["ok   hosts           1 host ready, no worker placed on one", f"                     note: {_READY}"]


def _failure(result: Any) -> tuple[str, str | None]:
    assert result.failure is not None and result.run_id is None
    return result.failure.reason, result.failure.hint


def test_an_unreachable_saved_machine_fails_closed_naming_the_host(tmp_path: Path, cloned: Path) -> None:
    result, _, ssh, text = run_preflight(tmp_path, cloned, "buildbox", reachable=False)

    assert text.splitlines()[-1] == "FAIL hosts           buildbox: saved machine buildbox unreachable"
    assert _failure(result) == (
        "host buildbox: herdr cannot reach the saved machine \"buildbox\"",
        "`herdr machine reconnect buildbox` finishes its SSH sign-in in a terminal; then preflight again",
    )
    assert ssh.commands == []


def test_a_saved_machine_in_another_session_is_named(tmp_path: Path, cloned: Path) -> None:
    result, _, _, text = run_preflight(tmp_path, cloned, "buildbox", session="default")

    assert text.splitlines()[-1] == "FAIL hosts           buildbox: its session is default"
    assert _failure(result) == (
        "host buildbox: its saved machine serves herdr session \"default\", but the plan's organization \"acme\" needs the session \"acme\"",
        "save the machine with `--remote-session acme` (`herdr machine add me@buildbox.lan --label buildbox --remote-session acme`)",
    )


def test_ssh_that_cannot_log_in_fails_closed_naming_the_host(tmp_path: Path, cloned: Path) -> None:
    refused = {"herdr integration status": (255, "", "me@buildbox.lan: Permission denied (publickey).\n")}
    result, _, _, text = run_preflight(tmp_path, cloned, "buildbox", ssh=refused)

    assert text.splitlines()[-1] == (
        "FAIL hosts           buildbox: ssh me@buildbox.lan herdr integration status: ssh failed: "
        "me@buildbox.lan: Permission denied (publickey)."
    )
    assert _failure(result) == (
        "host buildbox: cannot run herdr there over ssh (ssh me@buildbox.lan herdr integration status: ssh failed: me@buildbox.lan: Permission denied (publickey).)",
        "orch needs `ssh -o BatchMode=yes me@buildbox.lan herdr --version` to work without a prompt",
    )


def test_each_later_host_check_names_what_is_missing(tmp_path: Path, cloned: Path) -> None:
    sha = base_sha(cloned)
    checkout_cmd = f"git -C /home/me/src/acme/widgets rev-parse --verify --quiet '{sha}^{{commit}}'"
    cases = [
        (
            {"command -v codex": (1, "", "")},
            "buildbox: `codex` is not on its PATH",
            "host buildbox: codex is not installed there: `codex` is not on the PATH of a non-interactive ssh shell",
            "install codex on buildbox so that `ssh me@buildbox.lan command -v codex` finds it",
        ),
        (
            {checkout_cmd: (1, "", "")},
            "buildbox: /home/me/src/acme/widgets lacks <sha12>",
            "host buildbox: the checkout /home/me/src/acme/widgets lacks the base commit <sha> (origin/main on the controller)",
            "fetch it there (`git -C /home/me/src/acme/widgets fetch`), then preflight again",
        ),
        (
            {checkout_cmd: (128, "", "fatal: cannot change to '/home/me/src/acme/widgets': No such file or directory\n")},
            "buildbox: /home/me/src/acme/widgets is not a git checkout",
            "host buildbox: /home/me/src/acme/widgets is not a git checkout (fatal: cannot change to '/home/me/src/acme/widgets': No such file or directory)",
            "clone the repository to /home/me/src/acme/widgets on buildbox, or fix hosts.buildbox.checkout",
        ),
        (
            {"/opt/orch/bin/orch --version": (127, "", "sh: 1: /opt/orch/bin/orch: not found\n")},
            "buildbox: /opt/orch/bin/orch --version: sh: 1: /opt/orch/bin/orch: not found",
            "host buildbox: orch is not installed there (`/opt/orch/bin/orch --version` failed: sh: 1: /opt/orch/bin/orch: not found)",
            "install orch on buildbox, or set hosts.buildbox.orch to its path",
        ),
    ]
    for change, evidence, reason, hint in cases:
        for old in (tmp_path / "orch").glob("*"):  # a fresh ledger for each case (nothing is created; be sure)
            assert old.name != "runs" or not any(old.iterdir())
        result, _, _, text = run_preflight(tmp_path, cloned, "buildbox", ssh={**healthy_ssh(sha), **change})
        assert text.splitlines()[-1] == f"FAIL hosts           {evidence}".replace(sha[:12], "<sha12>")
        assert (result.failure.reason.replace(sha, "<sha>"), result.failure.hint) == (reason, hint)


def test_a_controller_herdr_without_machine_forwarding_is_refused(tmp_path: Path, cloned: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text("buildbox"))
    engine, runner = make_engine(tmp_path, herdr_answers(cloned))  # herdr 0.7.5
    engine.remote_runner = ScriptedSsh({})

    result = preflight(engine, plan)

    assert render_preflight(result, symbols=False).splitlines()[-1] == "FAIL hosts           herdr 0.7.5 on the controller"
    assert _failure(result) == (
        "the controller's herdr is 0.7.5; hosts are reached through `herdr --machine`, which needs herdr 0.9.1 or later",
        "upgrade herdr on the controller and restart its server",
    )

