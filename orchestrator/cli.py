"""The `orch` command line: parse, call one engine function, render; no logic and no herdr calls here."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from orchestrator import __version__
from orchestrator.config import Settings
from orchestrator.errors import ConfigError, ExitCode, OrchError
from orchestrator.plan import Plan, check_report, load_plan, render_check


@contextmanager
def error_handler() -> Iterator[None]:
    """Turn OrchError into one `orch: <message>` line and its exit code; never a traceback."""
    try:
        yield
    except OrchError as exc:
        click.echo(f"orch: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        click.echo("orch: interrupted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="orch", message="%(prog)s %(version)s")
def cli() -> None:
    """Run a fleet of coding-agent workers inside herdr.

    \b
    Example:
      orch plan check plan.toml
    """


@cli.group()
def plan() -> None:
    """Check plan files and print their schema."""


@contextmanager
def problem_lines() -> Iterator[None]:
    """Print each line of a multi-problem ConfigError as its own `orch: ` line, then exit 1."""
    try:
        yield
    except ConfigError as exc:
        for line in exc.message.splitlines():
            click.echo(f"orch: {line}", err=True)
        sys.exit(int(exc.exit_code))


@plan.command("check")
@click.argument("plan_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def plan_check(plan_file: Path, as_json: bool) -> None:
    """Validate PLAN_FILE and show what would be provisioned; nothing is changed.

    \b
    Example:
      orch plan check plan.toml
    """
    with problem_lines():
        resolved = load_plan(plan_file, Settings.from_env())
    if as_json:
        click.echo(json.dumps(check_report(resolved), indent=2))
    else:
        click.echo(render_check(resolved), nl=False)


@plan.command("schema")
def plan_schema() -> None:
    """Print the JSON Schema of plan files (for editors)."""
    click.echo(json.dumps(Plan.model_json_schema(), indent=2))


def main() -> None:
    """Console-script entry point."""
    with error_handler():
        cli(standalone_mode=True)
