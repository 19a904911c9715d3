"""The `result` message body and the Markdown check report, in the stable format docs/scenarios.md documents."""

from __future__ import annotations

from dataclasses import dataclass

TAIL_LINES = 3


@dataclass(frozen=True)
class Check:
    """One verification command and what it did (or what the worker claims it did)."""

    command: str
    exit_code: int
    output: str = ""


def tail(output: str, lines: int = TAIL_LINES) -> list[str]:
    """The last non-blank lines of a command's output."""
    kept = [line.rstrip() for line in output.splitlines() if line.strip()]
    return kept[-lines:]


def needs_report(checks: list[Check]) -> bool:
    """Output longer than the tail goes to a Markdown report instead of the prompt."""
    return any(len([line for line in check.output.splitlines() if line.strip()]) > TAIL_LINES for check in checks)


def format_result(
    *,
    status: str,
    commits: list[str],
    changed_files: list[str],
    checks: list[Check],
    report: str | None,
    residual_risk: str,
) -> str:
    """Render the result body: `Key: value` lines, one `- <command> => exit <code>` line per check plus its output tail."""
    lines = [
        f"Status: {status}",
        f"Commits: {' '.join(commits) if commits else 'none'}",
        f"Changed files: {', '.join(changed_files) if changed_files else 'none'}",
        "Checks:" if checks else "Checks: none",
    ]
    for check in checks:
        lines.append(f"- {check.command} => exit {check.exit_code}")
        lines.extend(f"  | {line}" for line in tail(check.output))
    if report is not None:
        lines.append(f"Report: {report}")
    lines.append(f"Residual risk: {residual_risk}")
    return "\n".join(lines)


def format_report(*, task: str, run: str, checks: list[Check]) -> str:
    """The Markdown report holding every check's full output."""
    parts = [f"# Checks for task {task} (run {run})", ""]
    for check in checks:
        parts += [f"## `{check.command}` => exit {check.exit_code}", "", "```text", check.output.rstrip("\n"), "```", ""]
    return "\n".join(parts)
