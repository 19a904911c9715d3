"""orch doctor's probe prompt: its exact text, and the simulator's agents read it as strictly as a packet."""

from __future__ import annotations

import pytest

from herdr_sim.agent.packet import PacketError, Probe, classify, fill_callback, parse_probe
from orchestrator.doctor import probe_text
RUN_ID = "w1:p1-20261201T090000Z"
PREFIX = ("env", "ORCH_HOME=/tmp/orch-doctor-x/home", "/venv/bin/orch", "inbox", "add", "--run", RUN_ID)
TEXT = probe_text(RUN_ID, "doctor-codex", "orch-doctor-codex", PREFIX)


def test_the_probe_is_one_step_through_the_message_contract() -> None:
    assert TEXT == (
        "Probe from orch doctor for task doctor-codex (run w1:p1-20261201T090000Z)\n"
        "\n"
        "This checks that you can reach the controller before real work starts; it is not a coding task.\n"
        "Your only step: send one `update` message whose text is exactly `probe ok` through the Message Contract below, "
        "then end your turn. Do not read, create or change any file.\n"
        "\n"
        "## Message Contract\n"
        "Write plain text only: escape sequences, control and invisible characters, or a line that looks like a message header, "
        "get a message kept aside unread.\n"
        "Send without `--wait`. Exit status 0 means the message was submitted, not read or accepted: never resend after success. "
        "On a non-zero exit, keep the exact error in your final response and do not retry in a loop.\n"
        "Send every message with exactly this command, replacing <kind> with update, question, blocked or result and <message> "
        'with your message (escape \\, ", $ and ` inside it, since it sits in double quotes):\n'
        "\n"
        "```sh\n"
        "env ORCH_HOME=/tmp/orch-doctor-x/home /venv/bin/orch inbox add --run w1:p1-20261201T090000Z "
        '"[herdr-orchestration run=w1:p1-20261201T090000Z task=doctor-codex from=orch-doctor-codex kind=<kind> reply-to=orch-doctor-codex]\n'
        '<message>"\n'
        "```\n"
    )


def test_a_simulated_agent_reads_the_probe_and_fills_its_callback_like_a_packets() -> None:
    probe = parse_probe(TEXT)
    assert (classify(TEXT), probe) == ("probe", Probe(
        run_id=RUN_ID, task_label="doctor-codex", kind="update", message="probe ok",
        callback="env ORCH_HOME=/tmp/orch-doctor-x/home /venv/bin/orch inbox add --run w1:p1-20261201T090000Z "
                 '"[herdr-orchestration run=w1:p1-20261201T090000Z task=doctor-codex from=orch-doctor-codex kind=<kind> reply-to=orch-doctor-codex]\n<message>"'))  # fmt: skip
    assert fill_callback(probe.callback, probe.kind, probe.message).endswith("kind=update reply-to=orch-doctor-codex]\nprobe ok\"")


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ("Probe from orch doctor for task doctor-codex (run", "Probe for task doctor-codex (run", "not a probe: Probe for task doctor-codex (run w1:p1-20261201T090000Z)"),
        ("Your only step: send one", "First, send one", "the probe names no step (Your only step: send one `<kind>` message whose text is exactly `<text>`)"),
        ("## Message Contract", "## Contract", "missing section: ## Message Contract"),
        ("kind=<kind>", "kind=update", "callback command has no <kind> placeholder"),
    ],
)
def test_a_probe_that_cannot_be_read_is_refused_in_one_line(old: str, new: str, error: str) -> None:
    with pytest.raises(PacketError) as caught:
        parse_probe(TEXT.replace(old, new, 1))
    assert str(caught.value) == error
