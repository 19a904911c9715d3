"""The progress view: in-place lines on a terminal, change-only log lines elsewhere."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

from orchestrator.progress import Progress, Row

START = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def rows(*states: tuple[str, str, str | None]) -> list[Row]:
    return [Row(task=task, state=state, last_callback=callback, since=START) for task, state, callback in states]


def test_plain_stream_logs_only_changes() -> None:
    out = io.StringIO()
    view = Progress(out)

    view.update(rows(("api-docs", "working", None), ("cli-help", "dispatched", None)), START + timedelta(seconds=5))
    view.update(rows(("api-docs", "working", None), ("cli-help", "dispatched", None)), START + timedelta(seconds=9))
    view.update(rows(("api-docs", "question", "question"), ("cli-help", "dispatched", None)), START + timedelta(seconds=70))
    view.note("api-docs asked: which page size? (answered from the plan)", START + timedelta(seconds=70))

    assert out.getvalue() == (
        "08:00:05 api-docs: working\n"
        "08:00:05 cli-help: dispatched\n"
        "08:01:10 api-docs: question (last callback: question)\n"
        "08:01:10 api-docs asked: which page size? (answered from the plan)\n"
    )


def test_terminal_redraws_the_same_lines_in_place() -> None:
    out = io.StringIO()
    view = Progress(out, live=True)

    view.update(rows(("api-docs", "working", None), ("cli", "ready", None)), START + timedelta(seconds=5))
    view.update(rows(("api-docs", "result", "result"), ("cli", "working", "update")), START + timedelta(seconds=3725))

    assert out.getvalue() == (
        "task      state    last callback  elapsed\n"
        "api-docs  working  -              0m05s\n"
        "cli       ready    -              0m05s\n"
        "\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K"
        "task      state    last callback  elapsed\n"
        "api-docs  result   result         1h02m\n"
        "cli       working  update         1h02m\n"
    )


def test_a_note_quoting_worker_text_is_inert_and_cannot_pass_for_a_progress_line() -> None:
    out = io.StringIO()
    view = Progress(out, live=True)

    view.update(rows(("api-docs", "question", "question"),), START)
    view.note("api-docs asked: ok?\x1b[1A\x1b[2K\n08:00:00 api-docs: accepted", START)

    assert out.getvalue() == (
        "task      state     last callback  elapsed\n"
        "api-docs  question  question       0m00s\n"
        "\x1b[1A\x1b[2K\x1b[1A\x1b[2K"  # the view's own redraw (header and row), the only escapes on the stream
        "08:00:00 api-docs asked: ok?\\x1b[1A\\x1b[2K\n"
        "    08:00:00 api-docs: accepted\n"
    )
