"""The crash matrix's seam in-process: off by default, and a LOSE point loses exactly the call it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import crash_seam
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
