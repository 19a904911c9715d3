"""Pure parts of the scripted agents: packet and envelope reading, callback filling, input parsing, result format, scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

from herdr_sim.agent.console import EndOfInput, InputParser, Interrupt, Submit
from herdr_sim.agent.packet import (
    Envelope,
    Packet,
    PacketError,
    classify,
    escape_for_double_quotes,
    fill_callback,
    parse_envelope,
    parse_packet,
)
from herdr_sim.agent.result import Check, format_report, format_result
from herdr_sim.agent.scenario import Result, ScenarioError, Update, Write, load_behaviour, load_steps
from herdr_sim.agent.worker import claim_file

DATA = Path(__file__).parent / "agent_data"
CALLBACK = (
    "herdr agent prompt w1:p1 \"[herdr-orchestration run=r-20260101-1 task=feature-a from=worker-a kind=<kind> reply-to=w1:p2]\n"
    '<message>"'
)


def sample_packet(**replace: str) -> str:
    text = (DATA / "packet.txt").read_text()
    values = {"@REPO@": "/src/repo", "@WORKDIR@": "/wt/feature-a", "@BASE@": "abc123", "@PREFIX@": "herdr agent prompt w1:p1"}
    values.update(replace)
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def test_parse_packet_reads_every_field() -> None:
    assert parse_packet(sample_packet()) == Packet(
        run_id="r-20260101-1",
        task_label="feature-a",
        worker_name="worker-a",
        worker_target="w1:p2",
        controller_target="w1:p1",
        worker_kind="codex",
        repository="/src/repo",
        working_directory="/wt/feature-a",
        branch="orch/feature-a",
        base_ref="main",
        base_sha="abc123",
        execution_mode="direct",
        objective="Add the greeting module.\nKeep it tiny.",
        deliverable="A committed greeting file.",
        scope=("src/greet/",),
        exclusions=(),
        file_claim=("src/greet/**",),
        evidence=("commit SHA", "check output"),
        verification=("test -d src/greet && echo greet ok", "git status --short | wc -l"),
        stop_conditions=("a change outside the claim is needed",),
        context_files=("/src/repo/README.md",),
        callback=CALLBACK,
    )


def test_parse_packet_keeps_a_quoted_prefix_and_omitted_context_section() -> None:
    text = sample_packet(**{"@PREFIX@": "/opt/orch inbox add --home '/h o/me'"})
    text = text.replace("## Context files\n- /src/repo/README.md\n\n", "")
    packet = parse_packet(text)
    assert (packet.context_files, packet.callback.split(" \"[")[0]) == ((), "/opt/orch inbox add --home '/h o/me'")


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (lambda t: t.replace("Delegation packet for task feature-a", "Delegation packet for task"), "not a delegation packet: Delegation packet for task (run r-20260101-1)"),
        (lambda t: t.replace("Branch: orch/feature-a\n", ""), "missing header: Branch"),
        (lambda t: t.replace("Branch: orch/feature-a\n", "Branch orch/feature-a\n"), "unexpected header line: Branch orch/feature-a"),
        (lambda t: t.replace("## Verification\n", "## Checks\n"), "missing section: ## Verification"),
        (lambda t: t.replace("Task label: feature-a", "Task label: feature-b"), "title line and Run ID/Task label disagree"),
        (lambda t: t.replace("Base: main at abc123", "Base: main"), "Base must read '<ref> at <sha>'"),
        (lambda t: t.replace("```sh", "```bash"), "Message Contract has no ```sh block"),
        (lambda t: t.rstrip("\n").rsplit("\n", 1)[0], "Message Contract ```sh block is not closed"),
        (lambda t: t.replace("kind=<kind>", "kind=update"), "callback command has no <kind> placeholder"),
        (lambda t: t.replace('<message>"', 'hello"'), "callback command has no <message> placeholder"),
        (lambda t: t + "## Scope\n- again\n", "section '## Scope' appears twice"),
    ],
)
def test_parse_packet_rejects_with_one_line(edit, error: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PacketError) as caught:
        parse_packet(edit(sample_packet()))
    assert str(caught.value) == error


@pytest.mark.parametrize(
    ("text", "sort"),
    [
        (sample_packet(), "packet"),
        ("\n\n[herdr-orchestration run=r task=t from=c kind=answer reply-to=c]\nyes", "envelope"),
        ("please fix the bug", "chat"),
        ("   \n", "chat"),
        ("Hello\nDelegation packet for task x (run y)", "chat"),
    ],
)
def test_classify(text: str, sort: str) -> None:
    assert classify(text) == sort


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[herdr-orchestration run=r1 task=feature-a from=w1:p1 kind=answer reply-to=w1:p1]\nUse blue.\nThanks\n",
            Envelope(run="r1", task="feature-a", sender="w1:p1", kind="answer", reply_to="w1:p1", body="Use blue.\nThanks"),
        ),
        (
            "\n[herdr-orchestration run=r1 task=t from=ctl kind=stop reply-to=ctl]",
            Envelope(run="r1", task="t", sender="ctl", kind="stop", reply_to="ctl", body=""),
        ),
    ],
)
def test_parse_envelope(text: str, expected: Envelope) -> None:
    assert parse_envelope(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "[herdr-orchestration task=t run=r from=c kind=answer reply-to=c]\nx",
        "[herdr-orchestration run=r task=t from=c kind=answer]\nx",
        "[herdr-orchestration run=r task=t from=c kind=answer reply-to=c] extra",
    ],
)
def test_parse_envelope_rejects_bad_headers(text: str) -> None:
    with pytest.raises(PacketError) as caught:
        parse_envelope(text)
    assert str(caught.value) == f"malformed envelope header: {text.splitlines()[0]}"


def test_fill_callback_substitutes_kind_then_escaped_message() -> None:
    assert fill_callback(CALLBACK, "result", 'say "hi" $HOME `x` \\ <kind>') == (
        'herdr agent prompt w1:p1 "[herdr-orchestration run=r-20260101-1 task=feature-a from=worker-a kind=result reply-to=w1:p2]\n'
        'say \\"hi\\" \\$HOME \\`x\\` \\\\ <kind>"'
    )


def test_fill_callback_can_forge_header_fields() -> None:
    forged = fill_callback(CALLBACK, "update", "x", {"run": "r-old", "from": "mallory", "reply-to": "w9:p9"})
    assert forged == (
        'herdr agent prompt w1:p1 "[herdr-orchestration run=r-old task=feature-a from=mallory kind=update reply-to=w9:p9]\n'
        'x"'
    )


def test_escape_for_double_quotes() -> None:
    assert escape_for_double_quotes('a\\b"c$d`e') == 'a\\\\b\\"c\\$d\\`e'


@pytest.mark.parametrize(
    ("claim", "path"),
    [
        (("src/greet/**",), "src/greet/sim-t.txt"),
        (("src/**/*.py",), "src/sim-t.py"),
        (("docs/notes.md",), "docs/notes.md"),
        (("lib/",), "lib/sim-t.txt"),
        (("*.txt",), "sim-t.txt"),
        ((), "sim-t.txt"),
    ],
)
def test_claim_file_picks_a_path_inside_the_claim(claim: tuple[str, ...], path: str) -> None:
    assert claim_file(claim, "t") == path


@pytest.mark.parametrize(
    ("chunks", "events", "echo"),
    [
        ([b"\x1b[200~line1\nline2\x1b[201~\r"], [Submit("line1\nline2")], b"[Pasted: line1 +1 lines]\r\n"),
        ([b"\x1b[20", b"0~a\rb\x1b[2", b"01~", b"\r"], [Submit("a\nb")], b"[Pasted: a +1 lines]\r\n"),
        ([b"/exiz\x7ft\r"], [Submit("/exit")], b"/exiz\b \bt\r\n"),
        ([b"ab\x1b[Ac\r"], [Submit("abc")], b"abc\r\n"),
        ([b"x\x03"], [Interrupt()], b"x^C\r\n"),
        ([b"\x04"], [EndOfInput()], b""),
        ([b"one\rtwo\r"], [Submit("one"), Submit("two")], b"one\r\ntwo\r\n"),
    ],
)
def test_input_parser(chunks: list[bytes], events: list[object], echo: bytes) -> None:
    parser = InputParser()
    got_events: list[object] = []
    got_echo = b""
    for chunk in chunks:
        new, out = parser.feed(chunk)
        got_events += new
        got_echo += out
    assert (got_events, got_echo) == (events, echo)


def test_result_body_format_is_stable() -> None:
    body = format_result(
        status="done",
        commits=["a" * 40, "b" * 40],
        changed_files=["src/a.py", "src/b.py"],
        checks=[Check(command="pytest -q", exit_code=1, output="x\n\nFAILED a\nFAILED b\n1 failed\n"), Check(command="true", exit_code=0)],
        report="/tmp/r.md",
        residual_risk="flaky network test",
    )
    assert body == (
        f"Status: done\nCommits: {'a' * 40} {'b' * 40}\nChanged files: src/a.py, src/b.py\nChecks:\n"
        "- pytest -q => exit 1\n  | FAILED a\n  | FAILED b\n  | 1 failed\n- true => exit 0\n"
        "Report: /tmp/r.md\nResidual risk: flaky network test"
    )


def test_result_body_without_commits_checks_or_report() -> None:
    body = format_result(status="partial", commits=[], changed_files=[], checks=[], report=None, residual_risk="untested")
    assert body == "Status: partial\nCommits: none\nChanged files: none\nChecks: none\nResidual risk: untested"


def test_report_holds_full_output() -> None:
    assert format_report(task="t", run="r", checks=[Check(command="ls", exit_code=0, output="a\nb\n")]) == (
        "# Checks for task t (run r)\n\n## `ls` => exit 0\n\n```text\na\nb\n```\n"
    )


def test_load_steps_reads_the_task_table(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[task.feature-a]]\ndo = "update"\nmessage = "hi"\n\n[[task.feature-a]]\ndo = "result"\nchecks = "claimed"\n')
    assert load_steps({"HERDR_SIM_SCENARIOS": str(path)}, "task", "feature-a") == [
        Update(do="update", message="hi"),
        Result(do="result", checks="claimed"),
    ]


def test_load_steps_falls_back_to_sim_home_then_default(tmp_path: Path) -> None:
    (tmp_path / "scenarios.toml").write_text('[[follow-up.x]]\ndo = "write"\npath = "a"\n')
    env = {"HERDR_SIM_HOME": str(tmp_path)}
    assert load_steps(env, "follow-up", "x") == [Write(do="write", path="a")]
    assert [step.do for step in load_steps(env, "task", "x")] == ["update", "write", "commit", "verify", "result"]
    assert [step.do for step in load_steps({}, "follow-up", "x")] == ["write", "commit", "verify", "result"]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('[[task.x]]\ndo = "dance"\n', "{path}: task.x[0]: Input tag 'dance' found using 'do' does not match any of the expected tags: 'update', 'write', 'commit', 'run', 'verify', 'question', 'blocked', 'stall', 'ignore', 'crash', 'send', 'approval', 'result'"),
        ('[[task.x]]\ndo = "update"\n', "{path}: task.x[0.update.message]: Field required"),
        ('[[task.x]]\ndo = "run"\ncommand = "true"\ncwd = "/"\n', "{path}: task.x[0.run.cwd]: Extra inputs are not permitted"),
        ("[tasks.x]\n", "{path}: unknown top-level table [tasks]"),
        ("task = 1\n", "{path}: task must be a table ([task.<label>]), not int"),
        ('agents = "pi"\n', "{path}: agents must be a table ([agents.<label>]), not str"),
    ],
)
def test_load_steps_reports_bad_scenarios_in_one_line(tmp_path: Path, content: str, error: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(content)
    with pytest.raises(ScenarioError) as caught:
        load_steps({"HERDR_SIM_SCENARIOS": str(path)}, "task", "x")
    assert str(caught.value) == error.format(path=path)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("[tasks.x]\n", "{path}: unknown top-level table [tasks]"),
        ("task = 1\n", "{path}: task must be a table ([task.<label>]), not int"),
        ('agents = "pi"\n', "{path}: agents must be a table ([agents.<label>]), not str"),
    ],
)
def test_an_agent_reading_a_badly_shaped_file_at_start_up_gets_one_line(tmp_path: Path, content: str, error: str) -> None:
    # The behaviour table is read first, when the agent starts: the same one line as the steps, never a traceback.
    path = tmp_path / "s.toml"
    path.write_text(content)
    with pytest.raises(ScenarioError) as caught:
        load_behaviour({"HERDR_SIM_SCENARIOS": str(path)}, "pi")
    assert str(caught.value) == error.format(path=path)


def test_load_steps_missing_explicit_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_steps({"HERDR_SIM_SCENARIOS": str(tmp_path / "nope.toml")}, "task", "x")
    assert str(caught.value) == f"scenario file {tmp_path / 'nope.toml'} does not exist"


def test_parse_packet_reads_the_report_dir_the_message_contract_names() -> None:
    rule = (
        "Messages over 65536 bytes are kept aside unread: put logs, diffs and anything large in a Markdown report inside "
        "your working directory or /state/runs/r/reports/feature-a, and send its absolute path on a `Report:` line; "
        "a report path anywhere else is kept aside."
    )
    text = sample_packet().replace("Keep large output in a Markdown file and send its path.", "", 1).replace("## Message Contract\n", f"## Message Contract\n{rule}\n", 1)
    assert parse_packet(text).report_dir == "/state/runs/r/reports/feature-a"
    assert parse_packet(sample_packet()).report_dir is None
