"""The `result` message body: its line format (stated in every packet), its reader and the one record of what it claims."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["RESULT_FORMAT", "STATUSES", "ReportedCheck", "ResultReport", "parse_result"]

STATUSES: tuple[str, ...] = ("done", "partial", "failed")

# The exact text the packet's Message Contract section shows workers (one line per field, any order).
RESULT_FORMAT: tuple[str, ...] = (
    "Status: done               [or partial, or failed]",
    "Commits: SHA SHA           [full commit ids; or none]",
    "Changed files: PATH, PATH  [or none]",
    "Checks:                    [or Checks: none, with no check lines]",
    "- COMMAND => exit CODE",
    "  | OUTPUT                 [the last output lines of that check, at most 3]",
    "Report: PATH               [absolute path of a Markdown report; one line per report, only when written]",
    "Residual risk: TEXT",
)

_KEY_RE = re.compile(r"^\s*(status|commits|changed\s+files|checks|report|residual\s+risk)\s*:\s*(.*?)\s*$", re.IGNORECASE)
_CHECK_RE = re.compile(r"^\s*-\s+(?P<command>.*?)\s*=>\s*exit\s+(?P<code>-?\d+)\s*$")
_OUTPUT_RE = re.compile(r"^\s*\|(?: (?P<text>.*)|(?P<empty>))$")
_SHA_RE = re.compile(r"[0-9a-f]{7,64}")
_NONE = "none"


@dataclass(frozen=True)
class ReportedCheck:
    """One check the worker says it ran: the command, the exit code it reported and the output tail it pasted."""

    command: str
    exit_code: int
    output: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResultReport:
    """What a `result` body claims, field by field; `problems` lists every line that could not be read (never guessed).

    The one result type: the intake stores it on the worker (`to_json`), observe summarises it, verification checks
    it against git (`orchestrator.evidence.verify`).
    """

    status: str | None = None
    commits: tuple[str, ...] = ()
    changed_files: tuple[str, ...] = ()
    checks: tuple[ReportedCheck, ...] = ()
    reports: tuple[str, ...] = ()
    residual_risk: str | None = None
    problems: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Every required field was given and every line was understood."""
        return not self.problems

    def to_json(self) -> str:
        """The JSON stored as the worker's `reported_checks` (compact, fields in order, UTF-8 kept)."""
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))


def _key(raw: str) -> str:
    return " ".join(raw.lower().split())


def _command(text: str) -> str:
    # Packets show commands as inline code; a worker copying the backticks still means the same command.
    if len(text) >= 2 and text.startswith("`") and text.endswith("`"):
        return text[1:-1].strip()
    return text


def parse_result(body: str) -> ResultReport:
    """Read a `result` body: keys in any order and case, any spacing; unreadable lines become problems, not guesses."""
    problems: list[str] = []
    seen: set[str] = set()
    fields: dict[str, Any] = {}
    checks: list[ReportedCheck] = []
    reports: list[str] = []
    risk: list[str] | None = None
    section: str | None = None  # the key whose continuation lines may follow

    def once(key: str, number: int) -> bool:
        if key in seen:
            problems.append(f"line {number}: {key.capitalize()} is given twice")
            return False
        seen.add(key)
        return True

    for number, line in enumerate(body.replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1):
        if not line.strip():
            continue
        match = _KEY_RE.match(line)
        if match:
            key, value = _key(match.group(1)), match.group(2)
            section = key
            if key == "report":
                if value:
                    reports.append(value)
                else:
                    problems.append(f"line {number}: Report has no path")
                continue
            if not once(key, number):
                section = None
                continue
            if key == "status":
                if value.lower() in STATUSES:
                    fields["status"] = value.lower()
                else:
                    problems.append(f"line {number}: Status {value!r} is not one of {', '.join(STATUSES)}")
            elif key == "commits":
                if value.lower() != _NONE:
                    words = value.replace(",", " ").split()
                    bad = [word for word in words if not _SHA_RE.fullmatch(word.lower())]
                    if bad or not words:
                        problems.append(f"line {number}: Commits {value!r} is not a list of commit ids (or none)")
                    else:
                        fields["commits"] = tuple(word.lower() for word in words)
            elif key == "changed files":
                if value.lower() != _NONE:
                    paths = [part.strip() for part in value.split(",")]
                    if not value or any(not path for path in paths):
                        problems.append(f"line {number}: Changed files {value!r} is not a comma-separated list of paths (or none)")
                    else:
                        fields["changed_files"] = tuple(paths)
            elif key == "checks":
                if value.lower() == _NONE:
                    section = None
                elif value:
                    problems.append(f"line {number}: Checks: must be followed by check lines on the next lines (or be 'Checks: none')")
            elif key == "residual risk":
                risk = [value] if value else []
            continue
        if section == "checks":
            check = _CHECK_RE.match(line)
            output = _OUTPUT_RE.match(line)
            if check:
                command = _command(check.group("command"))
                if command:
                    checks.append(ReportedCheck(command=command, exit_code=int(check.group("code"))))
                    continue
            elif output and checks:
                last = checks[-1]
                text = output.group("text") or ""
                checks[-1] = ReportedCheck(command=last.command, exit_code=last.exit_code, output=(*last.output, text.rstrip()))
                continue
            problems.append(f"line {number}: check line {line.strip()!r} is not '- <command> => exit <code>' or '  | <output>'")
            continue
        if section == "residual risk" and risk is not None:
            risk.append(line.strip())
            continue
        problems.append(f"line {number}: {line.strip()!r} is not a result field")

    for key, label in (("status", "Status"), ("commits", "Commits"), ("changed files", "Changed files"), ("checks", "Checks"), ("residual risk", "Residual risk")):
        if key not in seen:
            problems.append(f"missing {label}:")
    return ResultReport(
        status=fields.get("status"),
        commits=fields.get("commits", ()),
        changed_files=fields.get("changed_files", ()),
        checks=tuple(checks),
        reports=tuple(reports),
        residual_risk=" ".join(part for part in risk if part) if risk else None,
        problems=tuple(problems),
    )
