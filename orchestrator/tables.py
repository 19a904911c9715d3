"""Tables for people: tabulate's columns, or one block per row when they would be wider than the terminal."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

from tabulate import tabulate


def terminal_width() -> int | None:
    """The columns output must fit: `COLUMNS` when set (through a pipe too), else the terminal's; None for a pipe or
    file without it, which gets whole tables (one line per row) to grep."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def table(rows: Sequence[Sequence[object]], headers: Sequence[str], width: int | None, *, tablefmt: str = "simple") -> str:
    """A table, or (wider than ``width``) one block per row: its first cell, then `header  value` lines."""
    text = tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)
    if width is None or not rows or max(len(line) for line in text.splitlines()) <= width:
        return text
    pad = max(len(h) for h in headers[1:])
    blocks = []
    for row in rows:
        lines = [f"{headers[0]} {row[0]}"] + [f"  {header:<{pad}}  {value}" for header, value in zip(headers[1:], row[1:], strict=True)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
