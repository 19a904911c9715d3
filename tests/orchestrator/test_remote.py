"""The ways orch reaches another host: ssh's one argv (free text survives the remote shell word for word) and herdr's
`--machine` prefix, built only in orchestrator/herdr.py."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

import pytest

from orchestrator.errors import HerdrCall, HostUnreachable, HerdrUnavailable
from orchestrator.herdr import HerdrCli, RetryPolicy, machine_forwards
from orchestrator.remote import run_remote, ssh_argv

HOSTILE = [
    "plain",
    "two words",
    "it's",
    'say "hi"',
    "line one\nline two",
    "$(touch /tmp/orch-pwned)",
    "`id`",
    "a; rm -rf ~",
    "--session",
    "--machine",
    "-x",
    "*",
    "~",
    "",
    "tab\there",
    "back\\slash",
    "[herdr-orchestration run=r task=t from=w kind=result reply-to=c]",
    "ünïcödé ✓",
]


def test_ssh_argv_quotes_the_remote_command_as_one_word() -> None:
    assert ssh_argv("me@box", ["herdr", "agent", "prompt", "w1:p1", "it's $(x)"]) == [
        "ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "me@box", "--", "herdr agent prompt w1:p1 'it'\"'\"'s $(x)'",
    ]  # fmt: skip


def test_free_text_reaches_the_remote_process_word_for_word() -> None:
    # sshd hands the command string to the user's shell: run it through sh -c exactly as that would, and compare.
    command = ssh_argv("me@box", ["printf", "%s\\0", *HOSTILE])[-1]
    out = subprocess.run(["sh", "-c", command], capture_output=True, check=True, timeout=10).stdout
    assert out.decode().split("\0")[:-1] == HOSTILE


class Recorded:
    """A runner that answers every call with one process result and records the argv."""

    def __init__(self, rc: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.result = (rc, stdout, stderr)
        self.argvs: list[list[str]] = []

    def __call__(self, argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        self.argvs.append(list(argv))
        return subprocess.CompletedProcess(list(argv), *self.result)


def test_a_machine_bound_cli_prefixes_every_call_and_sends_no_session() -> None:
    runner = Recorded(stdout='{"id":"cli:agent:prompt","result":{"type":"ok"}}')
    cli = HerdrCli("/opt/herdr", machine="buildbox", runner=runner)
    cli.pane_send_text("w1:p2", "--machine $(x)\nnext")

    assert runner.argvs == [["/opt/herdr", "--machine", "buildbox", "pane", "send-text", "w1:p2", "--machine $(x)\nnext"]]
    assert cli.calls[0].command == "herdr --machine buildbox pane send-text"


def test_a_machine_bound_cli_refuses_what_herdr_does_not_forward() -> None:
    cli = HerdrCli("herdr", machine="buildbox", runner=Recorded())
    for call in (cli.integration_status, cli.session_list, cli.status, cli.api_schema_methods, cli.pane_current):
        with pytest.raises(ValueError, match="herdr --machine does not forward"):
            call()
    assert machine_forwards(["agent", "prompt", "x", "y"]) and machine_forwards(["status", "server", "--json"])
    assert not machine_forwards(["agent", "attach", "x"]) and not machine_forwards(["agent", "explain", "x", "--file", "f"])
    with pytest.raises(ValueError, match="saved machine's session"):
        HerdrCli("herdr", machine="buildbox", session="acme")
    with pytest.raises(ValueError, match="refuses the machine selector"):
        HerdrCli("herdr", machine="-x")


def test_a_host_herdr_over_ssh_that_cannot_connect_is_unreachable_not_a_bug() -> None:
    runner = Recorded(255, "", "ssh: connect to host box port 22: Connection refused\n")
    cli = HerdrCli("herdr", ssh="me@box", runner=runner, retry=RetryPolicy(read_attempts=1))

    with pytest.raises(HostUnreachable) as caught:
        cli.integration_status()

    assert isinstance(caught.value, HerdrUnavailable)
    assert caught.value.message == "ssh me@box herdr integration status: ssh failed: ssh: connect to host box port 22: Connection refused"
    assert runner.argvs == [["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "me@box", "--", "herdr integration status"]]


def test_run_remote_turns_a_missing_ssh_into_an_unreachable_result() -> None:
    def missing(argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError(2, "No such file or directory")

    result = run_remote("me@box", ["true"], runner=missing)
    assert (result.unreachable, result.detail()) == (True, "cannot run ssh: No such file or directory")


def test_call_command_names_the_host_never_the_free_text() -> None:
    call = HerdrCall(("ssh", "-T", "me@box", "--", "herdr agent prompt w1:p1 'secret text'"), 0, "", "", 0.0)
    assert call.command == "ssh me@box herdr agent prompt"
