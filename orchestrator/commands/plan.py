"""`orch plan check|schema`: validate a plan file and show what would be provisioned; print its JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orchestrator.commands.base import echo_json
from orchestrator.config import Settings
from orchestrator.dryrun import plan_commands, render_commands
from orchestrator.plan import Plan, check_report, load_plan, render_check
from orchestrator.tables import terminal_width


@click.group()
def plan() -> None:
    """Check plan files and print their schema.

    \b
    Example:
      orch plan check plan.toml
      orch plan schema > plan.schema.json
    """


@plan.command("check")
@click.argument("plan_file", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--commands", "commands", is_flag=True, help="Print every herdr and git command a run would make (happy path), in order; nothing runs.")
def plan_check(plan_file: Path, as_json: bool, commands: bool) -> None:
    """Validate PLAN_FILE and show what would be provisioned; nothing is changed.

    \b
    Example:
      orch plan check plan.toml
      orch plan check plan.toml --commands
    """
    resolved = load_plan(plan_file, Settings.from_env())
    if commands:
        listed = plan_commands(resolved)
        if as_json:
            echo_json({"plan": resolved.source, "commands": [{"tool": c.tool, "argv": list(c.argv), "cwd": c.cwd, "why": c.why} for c in listed if c.tool != "#"]})
        else:
            click.echo(render_commands(listed), nl=False)
        return
    if as_json:
        echo_json(check_report(resolved))
    else:
        click.echo(render_check(resolved, terminal_width()), nl=False)


@plan.command("schema")
def plan_schema() -> None:
    """Print the JSON Schema of plan files (for editors); the output is JSON already, so there is no --json.

    \b
    Example:
      orch plan schema > plan.schema.json
    """
    click.echo(json.dumps(Plan.model_json_schema(), indent=2))
