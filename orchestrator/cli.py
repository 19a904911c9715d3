"""The `orch` command line: parse, call one engine function, render; no logic and no herdr calls here."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from orchestrator import __version__
from orchestrator.errors import ExitCode, OrchError


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


def main() -> None:
    """Console-script entry point."""
    with error_handler():
        cli(standalone_mode=True)
