"""The crash matrix's seam in-process: off by default, and a LOSE point loses exactly the call it names."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from orchestrator import crash_seam, git, remote
from orchestrator.crash_seam import CrashSeam


def through(seam: CrashSeam, monkeypatch: pytest.MonkeyPatch, *argvs: list[str]) -> list[str]:
    """What orch sees for each call: the answer, or "lost"; and whether the call ran."""
    monkeypatch.setattr(crash_seam, "_SEAM", seam)
    seen = []
    for argv in argvs:
        ran: list[bool] = []
        answer = crash_seam.around(argv, lambda ran=ran: ran.append(True) or "answer", lambda: "lost")  # type: ignore[misc]
        seen.append(f"{answer}{'' if ran else ' (never ran)'}")
    return seen


def test_off_without_its_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    seam = CrashSeam({})
    assert not seam.active
    assert through(seam, monkeypatch, ["herdr", "agent", "prompt", "a", "x"]) == ["answer"]


def test_a_lose_point_counts_only_its_command_and_loses_before_or_after(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = (["herdr", "agent", "get", "a"], ["herdr", "--session", "s", "agent", "prompt", "a", "x"], ["herdr", "agent", "prompt", "b", "y"])
    assert through(CrashSeam({"ORCH_TEST_CRASH_AT": "2:before:LOSE:agent prompt"}), monkeypatch, *calls) == ["answer", "answer", "lost (never ran)"]
    assert through(CrashSeam({"ORCH_TEST_CRASH_AT": "1:after:LOSE:agent prompt"}), monkeypatch, *calls) == ["answer", "lost", "answer"]


def test_the_call_log_numbers_every_call_as_it_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    through(CrashSeam({"ORCH_TEST_HERDR_CALLS": str(log)}), monkeypatch, ["herdr", "agent", "get", "a"], ["herdr", "pane", "list"])
    assert [(line["n"], line["argv"]) for line in map(json.loads, log.read_text().splitlines())] == [(1, ["herdr", "agent", "get", "a"]), (2, ["herdr", "pane", "list"])]


def test_a_lose_point_counts_a_call_to_another_hosts_herdr_as_its_command(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = (["herdr", "worktree", "create", "--cwd", "/a"], ["herdr", "--machine", "buildbox", "worktree", "create", "--cwd", "/b"])
    assert through(CrashSeam({"ORCH_TEST_CRASH_AT": "2:after:LOSE:worktree create"}), monkeypatch, *calls) == ["answer", "lost"]


def crashes(seam: CrashSeam, monkeypatch: pytest.MonkeyPatch, *calls: tuple[list[str], bool]) -> list[str]:
    """Each call through the seam (``True``: a herdr call, which may be lost; else one over ssh or git): what orch saw,
    with "stopped" where the seam signalled the process (before the call ran, or after it and before orch read it)."""
    monkeypatch.setattr(crash_seam, "_SEAM", seam)
    seen: list[str] = []
    monkeypatch.setattr(CrashSeam, "_crash", lambda self: seen.append("stopped"))
    for argv, herdr in calls:
        seen.append(crash_seam.around(argv, lambda: "answer", (lambda: "lost") if herdr else None))
    return seen


SSH_ACK = ["ssh", "-T", "me@box", "--", "env ORCH_HOME=/o orch inbox ack --run r 1"]
FETCH = ["git", "-C", "/repo", "fetch", "--quiet", "--end-of-options", "me@box:/c", "+abc:refs/orch/r/t"]


def test_a_call_to_another_host_over_ssh_or_git_is_counted_and_stopped_at_like_a_herdr_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = ((["herdr", "agent", "get", "a"], True), (SSH_ACK, False), (FETCH, False))
    assert crashes(CrashSeam({"ORCH_TEST_CRASH_AT": "2:before:KILL"}), monkeypatch, *calls) == ["answer", "stopped", "answer", "answer"]
    assert crashes(CrashSeam({"ORCH_TEST_CRASH_AT": "3:after:KILL"}), monkeypatch, *calls) == ["answer", "answer", "stopped", "answer"]


def test_a_call_to_another_host_over_ssh_or_git_is_never_lost_nor_counted_toward_a_lose_point(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = ((SSH_ACK, False), (["herdr", "agent", "get", "a"], True), (FETCH, False), (["herdr", "agent", "get", "b"], True))
    assert crashes(CrashSeam({"ORCH_TEST_CRASH_AT": "1:after:LOSE"}), monkeypatch, *calls) == ["answer", "lost", "answer", "answer"]
    assert crashes(CrashSeam({"ORCH_TEST_CRASH_AT": "2:before:LOSE"}), monkeypatch, *calls) == ["answer", "answer", "answer", "lost"]


def test_a_stop_point_with_a_text_stops_at_the_kth_call_holding_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = ((SSH_ACK, False), (["herdr", "--machine", "box", "pane", "read", "w1:p1"], True), (SSH_ACK, False), (SSH_ACK, False))
    assert crashes(CrashSeam({"ORCH_TEST_CRASH_AT": "2:after:KILL:inbox ack"}), monkeypatch, *calls) == ["answer", "answer", "stopped", "answer", "answer"]
    assert crashes(CrashSeam({"ORCH_TEST_CRASH_AT": "1:before:TERM:--machine box pane read"}), monkeypatch, *calls) == [
        "answer", "stopped", "answer", "answer", "answer"]


def test_orchs_ssh_and_git_calls_to_another_host_go_through_the_seam_and_local_git_does_not(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    monkeypatch.setattr(crash_seam, "_SEAM", CrashSeam({"ORCH_TEST_HERDR_CALLS": str(log)}))
    done = lambda argv, **_: subprocess.CompletedProcess(argv, 0, "", "")  # noqa: E731
    monkeypatch.setattr(git, "run_child", done)

    remote.run_remote("me@box", ["orch", "inbox", "ack", "--run", "r", "1"], runner=done)
    git.run_git(["worktree", "remove", "/c/w"], cwd="/c", on="me@box")
    git.fetch_commit("/repo", "me@box:/c", "a" * 40, "refs/orch/r/t")
    git.run_git(["status"], cwd="/repo")

    assert [line["argv"][0] + " " + line["argv"][-1].split(" ")[-1] for line in map(json.loads, log.read_text().splitlines())] == [
        "ssh 1", "ssh /c/w", f"git +{'a' * 40}:refs/orch/r/t"]
