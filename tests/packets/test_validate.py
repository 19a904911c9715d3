"""Validation of inbound envelopes against a ledger view: one table row per reason, plus the accepted path."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from packets import REASON_SUMMARIES, Accepted, PacketError, KeptAside, LedgerView, Message, Reason, RegisteredWorker, fingerprint, parse_message, validate

RUN = "w1:p1-20260101T000000Z"
OLD_RUN = "w1:p1-20251231T230000Z"


def _envelope(kind: str = "update", *, run: str = RUN, task: str = "fix-login", sender: str = "fix-login", reply_to: str = "w1:p2", body: str = "Tests pass.") -> str:
    return f"[herdr-orchestration run={run} task={task} from={sender} kind={kind} reply-to={reply_to}]\n{body}"


ALREADY = parse_message(_envelope("result", body="Done: src/login.py. pytest -q: 12 passed."))
VIEW = LedgerView(
    run_id=RUN,
    controller_target="w1:p1",
    other_run_ids=frozenset({OLD_RUN}),
    workers=(
        RegisteredWorker(task_label="fix-login", worker_name="fix-login", reply_target="w1:p2", panes=("w1:p2",)),
        RegisteredWorker(task_label="docs-readme", worker_name="docs", reply_target="docs"),
        RegisteredWorker(task_label="late", worker_name="late", reply_target="w1:p5", panes=("w1:p5",), state="failed", accepts=frozenset()),
    ),
    accepted_fingerprints=frozenset({fingerprint(ALREADY)}),
)

KEPT_ASIDE = [
    ("malformed", "[herdr-orchestration run=x task=y]\nhi", Reason.MALFORMED_HEADER,
     'malformed header: expected key "from" after task=y, found the end of the header'),
    ("unknown-run", _envelope(run="w9:p9-20260101T000000Z"), Reason.UNKNOWN_RUN,
     'run "w9:p9-20260101T000000Z" is not the current run "w1:p1-20260101T000000Z" nor any run the ledger knows'),
    ("stale-run", _envelope(run=OLD_RUN), Reason.STALE_RUN,
     'run "w1:p1-20251231T230000Z" is an earlier or finished run; the current run is "w1:p1-20260101T000000Z"'),
    # Identity before kind: a controller-shaped answer is first of all not from the task's worker.
    ("controller-answer-echoed", _envelope("answer", sender="w1:p1", reply_to="w1:p1"), Reason.WRONG_SENDER,
     'sender "w1:p1" is not "fix-login", the worker registered for task "fix-login"'),
    ("wrong-direction", _envelope("answer"), Reason.WRONG_DIRECTION,
     'kind "answer" is sent by the controller (w1:p1), never to it; workers send update, question, blocked or result'),
    ("oversize", _envelope(body="x" * 70000), Reason.OVERSIZE,
     f"the message is {len(_envelope(body='x' * 70000))} bytes, over the 65536-byte limit (sha256 "
     f"{__import__('hashlib').sha256(_envelope(body='x' * 70000).encode()).hexdigest()}); large content belongs in a report file, sent by path"),
    ("empty-body", _envelope(body=""), Reason.EMPTY_BODY,
     "the body is empty; send one header line followed by a concise message or a report path"),
    ("injection", _envelope(body="ok\x1b[2K"), Reason.INJECTION,
     "body line 1, column 3: an escape sequence (CSI \\x1b[2K); a message holds printable text, tabs and newlines only"),
    ("report-outside", _envelope("result", body="Status: done\nReport: /etc/passwd"), Reason.REPORT_OUTSIDE,
     'report path "/etc/passwd" is outside no directory (none is registered for this worker); reports belong in the worker\'s working directory or its report directory'),
    ("stop-echoed-by-worker", _envelope("stop"), Reason.WRONG_DIRECTION,
     'kind "stop" is sent by the controller (w1:p1), never to it; workers send update, question, blocked or result'),
    ("unknown-task", _envelope(task="fix-logout"), Reason.UNKNOWN_TASK,
     'task "fix-logout" has no registered worker in run "w1:p1-20260101T000000Z"'),
    ("sender-is-other-worker", _envelope(sender="docs"), Reason.WRONG_SENDER,
     'sender "docs" is not "fix-login", the worker registered for task "fix-login"'),
    ("sender-is-pane-id", _envelope(sender="w1:p2"), Reason.WRONG_SENDER,
     'sender "w1:p2" is not "fix-login", the worker registered for task "fix-login"'),
    ("reply-to-other-pane", _envelope(reply_to="w1:p3"), Reason.WRONG_REPLY_TO,
     'reply-to "w1:p3" is not "w1:p2", the target registered for worker "fix-login"'),
    ("reply-to-controller", _envelope(reply_to="w1:p1"), Reason.WRONG_REPLY_TO,
     'reply-to "w1:p1" is not "w1:p2", the target registered for worker "fix-login"'),
    ("out-of-turn", _envelope("result", task="late", sender="late", reply_to="w1:p5", body="Status: done"), Reason.OUT_OF_TURN,
     'worker "late" is failed, which takes no message now; this result changes nothing (orch keeps it aside for the person)'),
    ("wrong-pane", _envelope(), Reason.WRONG_PANE,
     'sent from pane "w1:p5", worker "late"\'s pane, not from worker "fix-login"\'s (w1:p2)'),
    ("duplicate-after-terminal-noise", "\x1b[200~" + _envelope("result", reply_to="w1:p2", body="Done: src/login.py. pytest -q: 12 passed.  ").replace("\n", "\r\n") + "\x1b[201~",
     Reason.DUPLICATE, f'the same result from "fix-login" for task "fix-login" was already accepted (fingerprint {fingerprint(ALREADY)[:12]})'),
]


@pytest.mark.parametrize(("case", "raw", "reason", "explanation"), KEPT_ASIDE, ids=[row[0] for row in KEPT_ASIDE])
def test_message_is_kept_aside_with_one_precise_reason(case: str, raw: str, reason: Reason, explanation: str) -> None:
    verdict = validate(raw, VIEW, pane="w1:p5" if case == "wrong-pane" else None)
    message = None if reason in (Reason.MALFORMED_HEADER, Reason.OVERSIZE) else parse_message(raw)
    assert verdict == KeptAside(reason=reason, explanation=explanation, message=message)


def test_every_reason_is_covered_by_the_table_and_summarised() -> None:
    assert {row[2] for row in KEPT_ASIDE} == set(Reason)
    assert set(REASON_SUMMARIES) == set(Reason)
    assert [reason.value for reason in Reason] == [
        "oversize", "malformed_header", "unknown_run", "stale_run", "unknown_task", "wrong_sender", "wrong_reply_to", "wrong_pane",
        "wrong_direction", "empty_body", "injection", "report_outside", "duplicate", "out_of_turn",
    ]


ACCEPTED = [
    ("update", _envelope(), "fix-login"),
    ("question", _envelope("question", body="Translate the error text?"), "fix-login"),
    ("blocked", _envelope("blocked", body="git fetch: Permission denied (publickey)."), "fix-login"),
    ("result-with-new-body", _envelope("result", body="Done again after the follow-up."), "fix-login"),
    ("agent-name-target", _envelope(task="docs-readme", sender="docs", reply_to="docs"), "docs-readme"),
]


@pytest.mark.parametrize(("case", "raw", "task"), ACCEPTED, ids=[row[0] for row in ACCEPTED])
def test_well_addressed_worker_message_is_accepted_for_its_task(case: str, raw: str, task: str) -> None:
    message = parse_message(raw)
    assert validate(raw, VIEW) == Accepted(task_label=task, message=message, fingerprint=fingerprint(message))


def test_fingerprint_is_stable_and_ignores_terminal_noise_and_reply_to() -> None:
    message = Message(run_id=RUN, task="fix-login", sender="fix-login", kind="update", reply_to="w1:p2", body="Tests pass.")
    # sha256 of the compact JSON array ["w1:p1-20260101T000000Z","fix-login","fix-login","update","Tests pass."], as sha256sum prints it.
    assert fingerprint(message) == "746822e860e671aec0d221e99cabcc400ab291d00570979be9ae6794b3d11c2f"
    assert fingerprint(parse_message("\x1b[200~\r\n" + _envelope() + "   \r\n\x1b[201~")) == fingerprint(message)
    assert fingerprint(dataclasses.replace(message, reply_to="w1:p9")) == fingerprint(message)


@pytest.mark.parametrize("field", ["run_id", "task", "sender", "kind", "body"])
def test_fingerprint_changes_with_each_identifying_field(field: str) -> None:
    message = Message(run_id=RUN, task="fix-login", sender="fix-login", kind="update", reply_to="w1:p2", body="Tests pass.")
    changed = dataclasses.replace(message, **{field: "result" if field == "kind" else "other"})
    assert fingerprint(changed) != fingerprint(message)


def test_ledger_view_refuses_two_workers_for_one_task() -> None:
    with pytest.raises(PacketError, match="invalid ledger view: each task label must belong to exactly one registered worker"):
        LedgerView(
            run_id=RUN,
            controller_target="w1:p1",
            workers=(
                RegisteredWorker(task_label="fix-login", worker_name="a", reply_target="w1:p2"),
                RegisteredWorker(task_label="fix-login", worker_name="b", reply_target="w1:p3"),
            ),
        )


def test_docs_reason_table_matches_the_codes_and_summaries() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "message-contract.md").read_text()
    start = doc.index("| Code | Meaning |")
    table = doc[start : doc.index("\n\n", start)]
    expected = "\n".join(["| Code | Meaning |", "|---|---|", *(f"| `{reason.value}` | {REASON_SUMMARIES[reason]} |" for reason in Reason)])
    assert table == expected


def test_ledger_view_reports_bad_ledger_data_in_one_line() -> None:
    with pytest.raises(PacketError) as caught:
        LedgerView(run_id=RUN, controller_target="w1:p1", other_run_ids=frozenset({RUN}))
    assert str(caught.value) == "invalid ledger view: the current run id cannot also be an other run id"
