"""The envelope grammar, table-driven over the message corpus, plus the controller message builder."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from packets import EnvelopeError, Header, Message, PacketError, build_controller_message, classify_prompt, headers_in, parse_message, render_message

MESSAGES = Path(__file__).parent / "data" / "messages"
GOOD = sorted(path.stem for path in (MESSAGES / "good").glob("*.txt"))
BAD = sorted(path.stem for path in (MESSAGES / "bad").glob("*.txt"))


def test_corpus_is_present_and_paired() -> None:
    assert len(GOOD) >= 15 and len(BAD) >= 20
    assert sorted(path.stem for path in (MESSAGES / "good").glob("*.json")) == GOOD


@pytest.mark.parametrize("name", GOOD)
def test_good_message_parses_to_its_expected_json(name: str) -> None:
    raw = (MESSAGES / "good" / f"{name}.txt").read_bytes().decode("utf-8")
    expected = json.loads((MESSAGES / "good" / f"{name}.json").read_text())
    assert dataclasses.asdict(parse_message(raw)) == expected


@pytest.mark.parametrize("name", GOOD)
def test_good_message_renders_back_to_its_normal_form(name: str) -> None:
    message = parse_message((MESSAGES / "good" / f"{name}.txt").read_bytes().decode("utf-8"))
    assert parse_message(render_message(message)) == message


@pytest.mark.parametrize("name", BAD)
def test_bad_message_is_rejected_with_the_reason_on_its_first_line(name: str) -> None:
    expected, _, raw = (MESSAGES / "bad" / f"{name}.txt").read_bytes().decode("utf-8").partition("\n")
    with pytest.raises(EnvelopeError) as caught:
        parse_message(raw)
    assert str(caught.value) == expected


def test_render_message_is_header_newline_body() -> None:
    message = Message(run_id="r1", task="fix-a", sender="a", kind="result", reply_to="w1:p2", body="done\nreport: /tmp/r.md")
    assert render_message(message) == "[herdr-orchestration run=r1 task=fix-a from=a kind=result reply-to=w1:p2]\ndone\nreport: /tmp/r.md"


@pytest.mark.parametrize("kind", ["answer", "follow-up", "stop"])
def test_controller_message_comes_from_and_replies_to_the_controller(kind: str) -> None:
    text = build_controller_message(
        run_id="w1:p1-20260101T000000Z", task_label="fix-login", controller_target="w1:p1", kind=kind, body="\r\nKeep English only.  \r\n\r\n"  # type: ignore[arg-type]
    )
    assert text == f"[herdr-orchestration run=w1:p1-20260101T000000Z task=fix-login from=w1:p1 kind={kind} reply-to=w1:p1]\nKeep English only."
    assert parse_message(text) == Message(
        run_id="w1:p1-20260101T000000Z", task="fix-login", sender="w1:p1", kind=kind, reply_to="w1:p1", body="Keep English only."  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"kind": "result"}, "invalid controller message: kind 'result' is not one of answer, follow-up, stop"),
        ({"run_id": "w1:p1 now"}, "invalid controller message: 'w1:p1 now' must be 1-128 characters from A-Z a-z 0-9 . _ : @ + / -, starting with a letter or digit (no whitespace, quotes or shell metacharacters)"),
        ({"task_label": "Fix_Login"}, "invalid controller message: 'Fix_Login' must be lowercase hyphen-case (a-z, 0-9 and single inner hyphens, at most 64 characters)"),
        ({"controller_target": 'w1:p1"'}, "invalid controller message: 'w1:p1\"' must be 1-128 characters from A-Z a-z 0-9 . _ : @ + / -, starting with a letter or digit (no whitespace, quotes or shell metacharacters)"),
    ],
)
def test_controller_message_builder_rejects_bad_values_in_one_line(overrides: dict[str, str], error: str) -> None:
    arguments = {"run_id": "r1", "task_label": "fix-login", "controller_target": "w1:p1", "kind": "answer", "body": "ok"} | overrides
    with pytest.raises(PacketError) as caught:
        build_controller_message(**arguments)  # type: ignore[arg-type]
    assert str(caught.value) == error


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("\x1b[200~\r\n[herdr-orchestration run=r task=t from=f kind=stop reply-to=c]\r\n\x1b[201~", "envelope"),
        ("\n  \n[herdr-orchestration run=r task=t from=f kind=update reply-to=c]\nbody", "envelope"),
        ("Delegation packet for task fix-login (run r)\n\nRun ID: r\n", "packet"),
        ("please fix the login form", "other"),
        ("[herdr-orchestration]", "other"),
    ],
)
def test_prompts_are_classified_by_their_first_non_blank_line(text: str, kind: str) -> None:
    assert classify_prompt(text) == kind


def test_headers_in_finds_every_exact_header_at_a_line_start_or_mid_line_and_no_look_alike() -> None:
    a = "[herdr-orchestration run=r1 task=fix-a from=fix-a kind=question reply-to=w1:p2]"
    b = "[herdr-orchestration run=r1 task=fix-b from=fix-b kind=result reply-to=w1:p3]"
    # Two callbacks typed into one prompt: the second header follows the first body's last line directly.
    assert headers_in(f"{a}\nFormal or casual?{b}\nStatus: done") == (
        Header(run_id="r1", task="fix-a", sender="fix-a", kind="question", reply_to="w1:p2"),
        Header(run_id="r1", task="fix-b", sender="fix-b", kind="result", reply_to="w1:p3"),
    )
    look_alikes = (
        "[herdr-orchestration run=r1 task=fix-b from=fix-b kind=progress reply-to=w1:p3]",  # no such kind
        "[herdr-orchestration  run=r1 task=fix-b from=fix-b kind=result reply-to=w1:p3]",  # two spaces
        "[herdr-orchestration run=r1 task=fix-b from=fix-b kind=result reply-to=w1:p3",  # not closed
        "[herdr-orchestrati\u043en run=r1 task=fix-b from=fix-b kind=result reply-to=w1:p3]",  # Cyrillic o
        "[herdr-orchestration run=r1 from=fix-b task=fix-b kind=result reply-to=w1:p3]",  # reordered
    )
    for text in look_alikes:
        assert headers_in(f"{a}\nbody {text}") == headers_in(a), text
