"""The `orch` command line: parse, call one engine function, render; no logic and no herdr calls here."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from orchestrator import __version__
from orchestrator.commands import completion as completion_commands
from orchestrator.commands import demo as demo_commands
from orchestrator.commands import dispatch as dispatch_commands
from orchestrator.commands import inbox as inbox_commands
from orchestrator.commands import observe as observe_commands
from orchestrator.commands import plan
from orchestrator.commands import preflight as preflight_commands
from orchestrator.commands import provision as provision_commands
from orchestrator.commands import report as report_commands
from orchestrator.commands import retire as retire_commands
from orchestrator.commands import run as run_commands
from orchestrator.commands import verify as verify_commands
from orchestrator.errors import ExitCode, OrchError
from packets import PacketError, inert_line
from registry import RegistryError


@contextmanager
def error_handler() -> Iterator[None]:
    """Turn OrchError into one `orch: <message>` line and its exit code; never a traceback."""
    try:
        yield
    except OrchError as exc:
        # A multi-problem error (e.g. a plan with three mistakes) prints one `orch:` line per problem.
        for line in exc.message.splitlines() or [type(exc).__name__]:
            click.echo(f"orch: {inert_line(line)}", err=True)
        if exc.hint:
            click.echo(f"hint: {inert_line(exc.hint)}", err=True)
        sys.exit(int(exc.exit_code))
    except (RegistryError, PacketError) as exc:
        click.echo(f"orch: {inert_line(str(exc))}", err=True)
        sys.exit(int(ExitCode.FAILURE))
    except KeyboardInterrupt:
        click.echo("orch: interrupted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))


class OrchGroup(click.Group):
    """The root group: every subcommand runs inside the one error handler (also under click's test runner)."""

    def invoke(self, ctx: click.Context) -> Any:
        with error_handler():
            return super().invoke(ctx)


@click.group(cls=OrchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="orch", message="%(prog)s %(version)s")
@click.option("--herdr", "herdr", metavar="PATH", envvar="ORCH_HERDR", help="herdr binary to run (default: herdr; env ORCH_HERDR).")
@click.option("-v", "--verbose", is_flag=True, help="Echo every herdr call to stderr.")
@click.pass_context
def cli(ctx: click.Context, herdr: str | None, verbose: bool) -> None:
    """Run a fleet of coding-agent workers inside herdr.

    \b
    Example:
      orch plan check plan.toml
    """
    ctx.ensure_object(dict)
    ctx.obj.update(herdr=herdr, verbose=verbose)


cli.add_command(plan.plan)
cli.add_command(inbox_commands.inbox)
cli.add_command(observe_commands.observe)
cli.add_command(observe_commands.answer)
cli.add_command(observe_commands.send)
cli.add_command(demo_commands.demo)
cli.add_command(dispatch_commands.dispatch)
cli.add_command(dispatch_commands.packet)
cli.add_command(preflight_commands.preflight)
cli.add_command(provision_commands.provision)
cli.add_command(report_commands.report)
cli.add_command(report_commands.status)
cli.add_command(retire_commands.retire)
cli.add_command(run_commands.run)
cli.add_command(run_commands.resume)
cli.add_command(verify_commands.verify)
cli.add_command(verify_commands.integrate)
cli.add_command(completion_commands.completion)


def main() -> None:
    """Console-script entry point."""
    with error_handler():
        cli(standalone_mode=True)
