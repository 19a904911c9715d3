"""The result body grammar: the scripted agents' format parses exactly; layout is forgiven, meaning is never guessed."""

from __future__ import annotations

import dataclasses

import pytest

from herdr_sim.agent.result import Check, format_result
from packets.result import RESULT_FORMAT, ReportedCheck, ResultReport, parse_result

SHA1 = "3f2a9c1e5b7d4f6a8c0e2b4d6f8a1c3e5b7d9f0a"
SHA2 = "0123456789abcdef0123456789abcdef01234567"

GOOD = f"""Status: done
Commits: {SHA1} {SHA2}
Changed files: src/a.py, src/b.py
Checks:
- python3 -m pytest -q => exit 0
  | 12 passed in 0.03s
- ruff check src => exit 1
  | src/a.py:3:1: F401 unused import
  | Found 1 error.
Report: /tmp/herdr-sim-reports/r1/feature-a.md
Residual risk: no test for empty names"""

GOOD_REPORT = ResultReport(
    status="done",
    commits=(SHA1, SHA2),
    changed_files=("src/a.py", "src/b.py"),
    checks=(
        ReportedCheck(command="python3 -m pytest -q", exit_code=0, output=("12 passed in 0.03s",)),
        ReportedCheck(command="ruff check src", exit_code=1, output=("src/a.py:3:1: F401 unused import", "Found 1 error.")),
    ),
    reports=("/tmp/herdr-sim-reports/r1/feature-a.md",),
    residual_risk="no test for empty names",
)


def test_the_scripted_agents_format_parses_exactly() -> None:
    body = format_result(
        status="done", commits=[SHA1], changed_files=["src/greet/sim-a.txt"],
        checks=[Check(command="true", exit_code=0, output="ok\n")], report=None, residual_risk="none known",
    )  # fmt: skip
    assert parse_result(body) == ResultReport(
        status="done", commits=(SHA1,), changed_files=("src/greet/sim-a.txt",),
        checks=(ReportedCheck(command="true", exit_code=0, output=("ok",)),), residual_risk="none known",
    )  # fmt: skip


def test_good_body() -> None:
    assert parse_result(GOOD) == GOOD_REPORT
    assert parse_result(GOOD).complete


def test_order_case_and_spacing_do_not_matter() -> None:
    shuffled = f"""

residual RISK :   no test for empty names
Report:/tmp/herdr-sim-reports/r1/feature-a.md
CHANGED   FILES: src/a.py ,src/b.py
Checks:
  -   `python3 -m pytest -q`   =>   exit 0
      |  12 passed in 0.03s
- ruff check src => exit 1
 | src/a.py:3:1: F401 unused import
 | Found 1 error.
commits: {SHA1.upper()}, {SHA2}
Status:   Done
"""
    assert parse_result(shuffled) == dataclasses.replace(GOOD_REPORT, checks=(
        ReportedCheck(command="python3 -m pytest -q", exit_code=0, output=(" 12 passed in 0.03s",)),
        *GOOD_REPORT.checks[1:],
    ))  # fmt: skip


def test_none_values() -> None:
    body = "Status: partial\nCommits: none\nChanged files: none\nChecks: none\nResidual risk: untested\nstill untested on macOS"
    assert parse_result(body) == ResultReport(status="partial", residual_risk="untested still untested on macOS")


@pytest.mark.parametrize(
    ("body", "problems"),
    [
        ("", ("missing Status:", "missing Commits:", "missing Changed files:", "missing Checks:", "missing Residual risk:")),
        (
            "Status: finished\nCommits: abc, not-a-sha\nChanged files: a.py,,b.py\nChecks: pytest passed\nResidual risk: none",
            (
                "line 1: Status 'finished' is not one of done, partial, failed",
                "line 2: Commits 'abc, not-a-sha' is not a list of commit ids (or none)",
                "line 3: Changed files 'a.py,,b.py' is not a comma-separated list of paths (or none)",
                "line 4: Checks: must be followed by check lines on the next lines (or be 'Checks: none')",
            ),
        ),
        (
            "Status: done\nCommits: none\nChanged files: none\nChecks:\n  | orphan output\n- pytest passed\n- make => exit ok\n- => exit 0\nResidual risk: none",
            (
                "line 5: check line '| orphan output' is not '- <command> => exit <code>' or '  | <output>'",
                "line 6: check line '- pytest passed' is not '- <command> => exit <code>' or '  | <output>'",
                "line 7: check line '- make => exit ok' is not '- <command> => exit <code>' or '  | <output>'",
                "line 8: check line '- => exit 0' is not '- <command> => exit <code>' or '  | <output>'",
            ),
        ),
        (
            "Done, all good.\nStatus: done\nStatus: done\nCommits: none\nChanged files: none\nChecks: none\nReport:\nResidual risk: none",
            ("line 1: 'Done, all good.' is not a result field", "line 3: Status is given twice", "line 7: Report has no path"),
        ),
    ],
    ids=["empty", "bad-values", "bad-check-lines", "stray-and-repeated"],
)
def test_bad_bodies_report_every_problem(body: str, problems: tuple[str, ...]) -> None:
    report = parse_result(body)
    assert report.problems == problems
    assert not report.complete


def test_an_unreadable_check_is_not_guessed() -> None:
    report = parse_result("Status: done\nCommits: none\nChanged files: none\nChecks:\n- pytest => exit 0\n- pytest passed\nResidual risk: none")
    assert report.checks == (ReportedCheck(command="pytest", exit_code=0),)


def test_the_format_shown_to_workers_names_every_field() -> None:
    assert [line.split(":")[0] for line in RESULT_FORMAT if not line.startswith(("-", " "))] == [
        "Status", "Commits", "Changed files", "Checks", "Report", "Residual risk",
    ]  # fmt: skip
