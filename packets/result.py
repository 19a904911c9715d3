"""The `result` message body as a model: its fixed line format and reader live in `packets.result_lines`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from packets.result_lines import RESULT_FORMAT, STATUSES, read_result

__all__ = ["RESULT_FORMAT", "STATUSES", "ReportedCheck", "ResultReport", "parse_result"]


class ReportedCheck(BaseModel):
    """One check the worker says it ran: the command, the exit code it reported and the output tail it pasted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str
    exit_code: int
    output: tuple[str, ...] = ()


class ResultReport(BaseModel):
    """What a `result` body claims, field by field; `problems` lists every line that could not be read (never guessed)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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


def parse_result(body: str) -> ResultReport:
    """Read a `result` body: keys in any order and case, any spacing; unreadable lines become problems, not guesses."""
    fields = read_result(body)
    return ResultReport(
        status=fields.status,
        commits=fields.commits,
        changed_files=fields.changed_files,
        checks=tuple(ReportedCheck(command=c.command, exit_code=c.exit_code, output=c.output) for c in fields.checks),
        reports=fields.reports,
        residual_risk=fields.residual_risk,
        problems=fields.problems,
    )
