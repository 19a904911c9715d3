"""Packet values: what is accepted, how free text is normalised, and the one-line error for each bad value."""

from __future__ import annotations

import dataclasses

import pytest

from packets import Packet, PacketError, build_packet

GOOD: dict[str, object] = {
    "run_id": "w1:p1-20260101T000000Z",
    "task_label": "fix-login",
    "worker_name": "fix-login",
    "worker_target": "w1:p2",
    "controller_target": "w1:p1",
    "worker_kind": "codex",
    "repo_path": "/home/me/src/acme/api",
    "workdir": "/home/me/src/acme/api.worktrees/api-fix-login",
    "branch": "fix/login",
    "base_ref": "origin/main",
    "base_sha": "3f2a9c1e5b7d4f6a8c0e2b4d6f8a1c3e5b7d9f0a",
    "execution_mode": "direct",
    "objective": "Fix the login.",
    "deliverable": "A commit.",
    "scope": ("src/login.py",),
    "file_claim": ("src/login.py",),
    "evidence": ("test output",),
    "verification": ("pytest -q",),
    "stop_conditions": ("anything unexpected",),
    "callback_prefix": ("herdr", "agent", "prompt", "w1:p1"),
}

TOKEN_RULE = "must be 1-128 characters from A-Z a-z 0-9 . _ : @ + / -, starting with a letter or digit (no whitespace, quotes or shell metacharacters)"

BAD = [
    ("task_label", "Fix-Login", "invalid packet: task_label: 'Fix-Login' must be lowercase hyphen-case (a-z, 0-9 and single inner hyphens, at most 64 characters)"),
    ("task_label", "fix--login", "invalid packet: task_label: 'fix--login' must be lowercase hyphen-case (a-z, 0-9 and single inner hyphens, at most 64 characters)"),
    ("task_label", "fix login", "invalid packet: task_label: 'fix login' must be lowercase hyphen-case (a-z, 0-9 and single inner hyphens, at most 64 characters)"),
    ("worker_name", "1worker", "invalid packet: worker_name: '1worker' must match [a-z][a-z0-9_-]{0,31}"),
    ("worker_name", "w" * 33, f"invalid packet: worker_name: '{'w' * 33}' must match [a-z][a-z0-9_-]{{0,31}}"),
    ("run_id", "run $(id)", f"invalid packet: run_id: 'run $(id)' {TOKEN_RULE}"),
    ("run_id", 'r"1', f"invalid packet: run_id: 'r\"1' {TOKEN_RULE}"),
    ("worker_target", "w1:p2;rm", f"invalid packet: worker_target: 'w1:p2;rm' {TOKEN_RULE}"),
    ("controller_target", "`w1`", f"invalid packet: controller_target: '`w1`' {TOKEN_RULE}"),
    ("worker_kind", "gpt", "invalid packet: worker_kind: must be one of pi, claude, codex, gemini, cursor, devin, agy, cline, omp, mastracode, opencode, copilot, kimi, kiro, droid, amp, grok, hermes, kilo, qodercli, maki"),
    ("repo_path", "src/acme/api", "invalid packet: repo_path: 'src/acme/api' must be an absolute, normalised path"),
    ("workdir", "/home/me/../me/api", "invalid packet: workdir: '/home/me/../me/api' must be an absolute, normalised path"),
    ("workdir", "/home/me/api/", "invalid packet: workdir: '/home/me/api/' must be an absolute, normalised path"),
    ("branch", "fix login", "invalid packet: branch: 'fix login' is not a valid git ref name"),
    ("branch", "fix..login", "invalid packet: branch: 'fix..login' is not a valid git ref name"),
    ("base_sha", "3f2a9c1", "invalid packet: base_sha: '3f2a9c1' must be a full lowercase hex commit id (40 or 64 digits)"),
    ("execution_mode", "plan", "invalid packet: execution_mode: must be one of direct, plan-first"),
    ("objective", "   \n  ", "invalid packet: objective: must not be empty"),
    ("objective", "Fix it.\n## Scope\nall", "invalid packet: objective: line '## Scope' looks like a packet section heading; lines starting with '## ' are reserved"),
    ("objective", "Run:\n```sh\nmake test", "invalid packet: objective: has an unclosed ``` code fence"),
    ("deliverable", "A\x1b[31m commit", "invalid packet: deliverable: must not contain control characters other than tab and newline"),
    ("scope", (), "invalid packet: scope: must list at least one item"),
    ("scope", ("a\nb",), "invalid packet: scope.0: list item 'a\\nb' must be one line without control characters"),
    ("scope", ["src/login.py"], "invalid packet: scope: must be a tuple, not list"),
    ("exclusions", ("none",), "invalid packet: exclusions.0: the exclusion 'none' is reserved for an empty list; pass no exclusions instead"),
    ("file_claim", ("/etc/passwd",), "invalid packet: file_claim.0: file claim '/etc/passwd' must be relative to the working directory, without '..'"),
    ("file_claim", ("src/../../x",), "invalid packet: file_claim.0: file claim 'src/../../x' must be relative to the working directory, without '..'"),
    ("verification", ("echo `id`",), "invalid packet: verification.0: verification command 'echo `id`' must not contain a backtick (it is rendered as inline code)"),
    ("stop_conditions", (), "invalid packet: stop_conditions: must list at least one item"),
    ("context_files", ("notes.md",), "invalid packet: context_files.0: 'notes.md' must be an absolute, normalised path"),
    ("callback_prefix", (), "invalid packet: callback_prefix: must list at least one item"),
    ("callback_prefix", ("herdr", ""), "invalid packet: callback_prefix.1: callback argument '' must be non-empty, one line, without control characters"),
    ("unknown_field", "x", "invalid packet: unknown_field: not a packet field"),
]


@pytest.mark.parametrize(("field", "value", "error"), BAD, ids=[f"{row[0]}-{index}" for index, row in enumerate(BAD)])
def test_bad_value_is_refused_with_one_line(field: str, value: object, error: str) -> None:
    with pytest.raises(PacketError) as caught:
        build_packet(GOOD | {field: value})
    assert str(caught.value) == error


def test_missing_field_is_refused_with_one_line() -> None:
    fields = dict(GOOD)
    del fields["stop_conditions"]
    with pytest.raises(PacketError) as caught:
        build_packet(fields)
    assert str(caught.value) == "invalid packet: stop_conditions: missing"


def test_free_text_may_hold_closed_code_fences() -> None:
    packet = build_packet(GOOD | {"objective": "Run:\n```sh\nmake test\n```\nthen report."})
    assert packet.objective == "Run:\n```sh\nmake test\n```\nthen report."


def test_free_text_and_items_are_normalised() -> None:
    packet = build_packet(GOOD | {"objective": "\n  Fix the login.   \n\n\tThen test it.  \n\n", "scope": ("  src/login.py  ",)})
    assert (packet.objective, packet.scope) == ("Fix the login.\n\n\tThen test it.", ("src/login.py",))


def test_packet_is_frozen_and_optional_sections_default_to_empty() -> None:
    packet = build_packet(GOOD)
    assert (packet.exclusions, packet.context_files) == ((), ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        packet.task_label = "other"  # type: ignore[misc]
    assert isinstance(packet, Packet)
