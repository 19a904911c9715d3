"""Packet rendering against golden files, round trips, placeholders, and the strict parser's error lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from packets import PacketSyntaxError, build_packet, parse_packet, render_packet
from packets.model import Packet
from packets.render import CLAIM_INTRO, READ_ONLY_CLAIM

GOLDEN_DIR = Path(__file__).parent / "golden"
RUN = "w1:p1-20260101T000000Z"
SHA = "3f2a9c1e5b7d4f6a8c0e2b4d6f8a1c3e5b7d9f0a"
REPO = "/home/me/src/acme/api"


def _base(**overrides: object) -> Packet:
    fields: dict[str, object] = {
        "run_id": RUN,
        "task_label": "feat-login-form",
        "worker_name": "login-form",
        "worker_target": "w1:p4",
        "controller_target": "w1:p1",
        "worker_kind": "codex",
        "repo_path": REPO,
        "workdir": "/home/me/src/acme/api.worktrees/api-feat-login-form",
        "branch": "feat/login-form",
        "base_ref": "origin/main",
        "base_sha": SHA,
        "execution_mode": "direct",
        "objective": "Add client-side validation to the login form so empty or malformed e-mail addresses are rejected before submit.",
        "deliverable": "One commit on feat/login-form with the validation and its tests, and a result message.",
        "scope": ("src/login/form.py: e-mail and password validation", "tests/login/test_form.py: new cases"),
        "exclusions": ("the server-side auth handler", "CSS and templates"),
        "file_claim": ("src/login/**", "tests/login/**"),
        "evidence": ("file and line references for every change", "the real output of each verification command"),
        "verification": ("python3 -m pytest tests/login -q", "ruff check src/login"),
        "stop_conditions": (
            "the form code is not where the scope says",
            "the same check fails three times in a row",
            "any authentication or permission prompt",
            "a needed edit falls outside the file claim",
        ),
        "callback_prefix": ("herdr", "agent", "prompt", "w1:p1"),
        "report_dir": "/home/me/.local/state/orch/runs/w1_p1-20260101T000000Z/reports/feat-login-form",
    }
    fields.update(overrides)
    return build_packet(fields)


PACKETS: dict[str, Packet] = {
    "isolated-worktree.txt": _base(),
    "sibling-worker.txt": _base(
        task_label="docs-readme",
        worker_name="docs",
        worker_target="docs",
        worker_kind="claude",
        workdir="/home/me/src/acme/api.worktrees/api-docs-readme",
        branch="docs/readme",
        objective="Document the login flow in the README.",
        deliverable="A README section, committed on docs/readme.",
        scope=("README.md: a new 'Logging in' section",),
        exclusions=(),
        file_claim=("README.md",),
        evidence=("the rendered section's headings",),
        verification=("python3 -m markdown README.md > /dev/null",),
        stop_conditions=("README.md has moved or been split",),
    ),
    "plan-first.txt": _base(
        task_label="refactor-session-store",
        worker_name="session-store",
        worker_target="w1:p5",
        worker_kind="opencode",
        workdir="/home/me/src/acme/api.worktrees/api-refactor-session-store",
        branch="refactor/session-store",
        execution_mode="plan-first",
        objective=(
            "Replace the in-memory session store with the SQLite one behind the same interface.\n"
            "\n"
            "Send your plan as a `question` first and wait for the answer before you edit anything."
        ),
        deliverable="A plan (as a question), then commits on refactor/session-store once the plan is accepted.",
        scope=("src/session/store.py", "src/session/sqlite.py (new)", "tests/session/**"),
        exclusions=("database migrations for other tables",),
        file_claim=("src/session/**", "tests/session/**"),
        verification=("python3 -m pytest tests/session -q",),
    ),
    "context-files-inbox.txt": _base(
        task_label="fix-rate-limit",
        worker_name="rate-limit",
        worker_target="w2:p3",
        controller_target="w2:p1",
        worker_kind="pi",
        run_id="w2:p1-20260102T093000Z",
        workdir="/home/me/src/acme/api.worktrees/api-fix-rate-limit",
        branch="fix/rate-limit",
        objective="Make the rate limiter honour the Retry-After header described in the incident report.",
        deliverable="A fix with a regression test, committed on fix/rate-limit.",
        scope=("src/http/ratelimit.py", "tests/http/test_ratelimit.py"),
        file_claim=("src/http/ratelimit.py", "tests/http/test_ratelimit.py"),
        context_files=("/home/me/orch-home/runs/w2-p1/context/incident-4711.md", "/home/me/orch-home/runs/w2-p1/context/retry after.log"),
        callback_prefix=("/opt/orch/bin/orch", "inbox", "add", "--home", "/home/me/.local/state/orch"),
    ),
    "read-only-review.txt": _base(
        task_label="review-login-form",
        worker_name="login-review",
        worker_target="w1:p6",
        worker_kind="claude",
        workdir="/home/me/src/acme/api.worktrees/api-feat-login-form",
        objective="Review the login form validation on feat/login-form for missed cases.",
        deliverable="A result message listing each problem found, with file and line.",
        scope=("src/login/form.py", "tests/login/test_form.py"),
        exclusions=("fixing what you find",),
        file_claim=(),
        evidence=("file and line references for every problem",),
        verification=("python3 -m pytest tests/login -q",),
        stop_conditions=("the branch has no login form changes",),
    ),
}


@pytest.mark.parametrize("name", sorted(PACKETS))
def test_packet_renders_exactly_as_its_golden_file(name: str, golden) -> None:
    golden.check(name, render_packet(PACKETS[name]))


@pytest.mark.parametrize("name", sorted(PACKETS))
def test_every_golden_packet_round_trips(name: str) -> None:
    text = (GOLDEN_DIR / name).read_text()
    packet = parse_packet(text)
    assert packet == PACKETS[name]
    assert render_packet(packet) == text


def test_golden_set_matches_the_declared_packets() -> None:
    assert sorted(path.name for path in GOLDEN_DIR.glob("*.txt")) == sorted(PACKETS)


@pytest.mark.parametrize("name", sorted(PACKETS))
def test_only_kind_and_message_are_left_as_placeholders(name: str) -> None:
    text = render_packet(PACKETS[name])
    block = text[text.index("```sh\n") : text.rindex("```")]
    # The sentence introducing the block names the two placeholders; the block holds them once each; nothing else is unfilled.
    intro = text[text.index("Send every message with exactly this command") : text.index("```sh\n")]
    rest = text.replace(block, "").replace(intro, "")
    assert re.findall(r"<[^<>\s]+>", block) == ["<kind>", "<message>"]
    assert re.findall(r"<[^<>\s]+>", intro) == ["<kind>", "<message>"]
    assert re.findall(r"<[^<>\s]+>", rest) == []


def test_callback_block_is_the_prefix_then_the_filled_envelope() -> None:
    text = render_packet(PACKETS["context-files-inbox.txt"])
    block = text[text.index("```sh\n") :]
    assert block == (
        "```sh\n"
        "/opt/orch/bin/orch inbox add --home /home/me/.local/state/orch"
        ' "[herdr-orchestration run=w2:p1-20260102T093000Z task=fix-rate-limit from=rate-limit kind=<kind> reply-to=w2:p3]\n'
        '<message>"\n'
        "```\n"
    )


def test_callback_prefix_words_are_shell_quoted() -> None:
    packet = _base(callback_prefix=("/opt/my tools/orch", "inbox", "add", "--home", "/srv/it's"))
    text = render_packet(packet)
    assert text.split("\n")[-4].startswith("""'/opt/my tools/orch' inbox add --home '/srv/it'"'"'s' "[herdr-orchestration run=""")
    assert parse_packet(text) == packet


ISOLATED = render_packet(PACKETS["isolated-worktree.txt"])


def _mutate(old: str, new: str) -> str:
    text = ISOLATED
    assert old in text
    return text.replace(old, new, 1)


PARSE_ERRORS = [
    ("wrong-title", _mutate("Delegation packet for task", "Delegation for task"), 1,
     "expected 'Delegation packet for task <task-label> (run <run-id>)', found 'Delegation for task feat-login-form (run w1:p1-20260101T000000Z)'"),
    ("missing-field", _mutate("Worker kind: codex\n", ""), 8, "expected 'Worker kind:' line, found 'Repository: /home/me/src/acme/api'"),
    ("bad-base", _mutate(f"Base: origin/main at {SHA}", "Base: origin/main"), 12, "expected 'Base: <ref> at <sha>', found 'origin/main'"),
    ("bad-label", _mutate("Task label: feat-login-form", "Task label: Feat-Login"), 4,
     "invalid packet value: task_label: 'Feat-Login' must be lowercase hyphen-case (a-z, 0-9 and single inner hyphens, at most 64 characters)"),
    ("title-disagrees", _mutate("(run w1:p1-20260101T000000Z)", "(run w9:p9-20260101T000000Z)"), 1,
     "expected 'Delegation packet for task feat-login-form (run w1:p1-20260101T000000Z)', found 'Delegation packet for task feat-login-form (run w9:p9-20260101T000000Z)'"),
    ("bad-bullet", _mutate("- tests/login/**", "* tests/login/**"), 32, "expected a '- ' bullet, found '* tests/login/**'"),
    ("no-backticks", _mutate("- `ruff check src/login`", "- ruff check src/login"), 43, "expected '- `<command>`', found '- ruff check src/login'"),
    ("edited-rules", _mutate("Send without `--wait`.", "Send with `--wait`."), 58,
     "expected 'Send without `--wait`. Exit status 0 means the message was submitted, not read or accepted: never resend after success. On a non-zero exit, keep the exact error in your final response and do not retry in a loop.', found 'Send with `--wait`. Exit status 0 means the message was submitted, not read or accepted: never resend after success. On a non-zero exit, keep the exact error in your final response and do not retry in a loop.'"),
    ("envelope-edited", _mutate("kind=<kind>", "kind=update"), 75,
     "expected 'herdr agent prompt w1:p1 \"[herdr-orchestration run=w1:p1-20260101T000000Z task=feat-login-form from=login-form kind=<kind> reply-to=w1:p4]', found 'herdr agent prompt w1:p1 \"[herdr-orchestration run=w1:p1-20260101T000000Z task=feat-login-form from=login-form kind=update reply-to=w1:p4]'"),
    ("edited-limit", _mutate("Messages over 65536 bytes", "Messages over many bytes"), 56,
     "expected 'Messages over <n> bytes are kept aside unread: …', found 'Messages over many bytes are kept aside unread: put logs, diffs and anything large in a Markdown report inside your working directory or /home/me/.local/state/orch/runs/w1_p1-20260101T000000Z/reports/feat-login-form, and send its absolute path on a `Report:` line; a report path anywhere else is kept aside.'"),
    ("no-trailing-newline", ISOLATED.rstrip("\n"), 77, "packet does not end where the format ends (one trailing newline)"),
    ("trailing-space", _mutate("Branch: feat/login-form", "Branch: feat/login-form "), 11, "invalid packet value: branch: 'feat/login-form ' is not a valid git ref name"),
    ("truncated", "Delegation packet for task a (run b)\n\nRun ID: b\n", 4, "expected 'Task label:' line, found ''"),
]


@pytest.mark.parametrize(("case", "text", "line", "reason"), PARSE_ERRORS, ids=[case[0] for case in PARSE_ERRORS])
def test_parser_rejects_what_the_renderer_would_not_produce(case: str, text: str, line: int, reason: str) -> None:
    with pytest.raises(PacketSyntaxError) as caught:
        parse_packet(text)
    assert (caught.value.line, caught.value.reason) == (line, reason)


READ_ONLY = render_packet(PACKETS["read-only-review.txt"])


@pytest.mark.parametrize(("old", "new", "line", "reason"), [
    (f"{READ_ONLY_CLAIM}\n", f"{READ_ONLY_CLAIM}\n- src/login/**\n", 30, "expected '', found '- src/login/**'"),
    (f"{READ_ONLY_CLAIM}\n", f"{CLAIM_INTRO}\n", 30, "expected at least one '- ' bullet"),
    (f"{READ_ONLY_CLAIM}\n", "None.\n", 29, f"expected {CLAIM_INTRO!r}, found 'None.'"),
], ids=["read-only-with-bullets", "intro-without-bullets", "edited-read-only-line"])
def test_parser_rejects_a_read_only_claim_that_is_not_exactly_rendered(old: str, new: str, line: int, reason: str) -> None:
    assert old in READ_ONLY
    with pytest.raises(PacketSyntaxError) as caught:
        parse_packet(READ_ONLY.replace(old, new, 1))
    assert (caught.value.line, caught.value.reason) == (line, reason)
