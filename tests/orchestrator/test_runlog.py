"""The run's orch.log: one inert line per herdr and git call, written once the run is known, from any thread."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

from orchestrator import git
from orchestrator.errors import HerdrCall
from orchestrator.runlog import RunLog, format_call

AT = datetime(2026, 12, 1, 8, 0, 0, 123000, tzinfo=UTC)


def test_a_line_says_tool_exit_time_argv_sizes_and_why_it_failed() -> None:
    assert format_call("herdr", ("herdr", "agent", "list", "--json"), 0, 0.0123, '{"id": 1}', "", AT) == (
        "2026-12-01T08:00:00.123+00:00 herdr exit=0 0.012s herdr agent list --json (stdout 9 B, stderr 0 B)"
    )
    assert format_call("git", ("git", "-C", "/r", "merge", "x"), 1, 1.5, "", "CONFLICT (content)\nAutomatic merge failed\n", AT) == (
        "2026-12-01T08:00:00.123+00:00 git exit=1 1.500s git -C /r merge x (stdout 0 B, stderr 42 B): CONFLICT (content) / Automatic merge failed"
    )
    assert format_call("herdr", ("herdr", "pane", "read"), None, 75.0, "", "", AT).split(" ")[2] == "exit=-"


def test_worker_text_is_escaped_and_long_words_are_cut() -> None:
    line = format_call("herdr", ("herdr", "agent", "prompt", "w1:p2", "evil \x1b[2J text\n" + "x" * 300), 0, 0.1, "", "", AT)
    assert "\x1b" not in line and "\n" not in line
    assert "'evil \\x1b[2J text\\n" in line and line.count("x") < 210


def test_calls_before_the_run_is_known_are_written_first_once_it_is(tmp_path: Path) -> None:
    log = RunLog()
    log.herdr(HerdrCall(("herdr", "status"), 0, "ok", "", 0.01))
    assert not (tmp_path / "run").exists()
    log.attach(tmp_path / "run" / "orch.log")
    log.git(git.GitResult(("git", "status"), 0, "", "", 0.02))
    lines = (tmp_path / "run" / "orch.log").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "herdr exit=0 0.010s herdr status (stdout 2 B, stderr 0 B)",
        "git exit=0 0.020s git status (stdout 0 B, stderr 0 B)",
    ]


def test_git_calls_reach_the_log_through_the_single_git_runner(tmp_path: Path) -> None:
    log = RunLog()
    log.attach(tmp_path / "orch.log")
    stop = git.observe(log.git)
    try:
        git.run_git(["init", "-q", str(tmp_path / "repo")])
        threads = [threading.Thread(target=git.run_git, args=(["rev-parse", "--git-dir"],), kwargs={"cwd": tmp_path / "repo"}) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop()
    git.run_git(["status"], cwd=tmp_path / "repo")  # after stop(): not logged
    lines = (tmp_path / "orch.log").read_text().splitlines()
    assert len(lines) == 9
    assert all(" git exit=0 " in line for line in lines)
    assert sum(f"git -C {tmp_path / 'repo'} rev-parse --git-dir" in line for line in lines) == 8
