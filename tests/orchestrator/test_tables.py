"""Tables fit the terminal: whole rows when they do (or nothing says how wide), one block per row when they do not."""

from __future__ import annotations

import pytest

from orchestrator.tables import table, terminal_width

ROWS = [("api", "feat/api", "src/api/**, tests/api/**"), ("docs", "docs/guide", "docs/**")]
HEADERS = ("task", "branch", "claim")


def test_a_table_that_fits_is_tabulate_s() -> None:
    assert table(ROWS, HEADERS, 80) == (
        "task    branch      claim\n"
        "------  ----------  ------------------------\n"
        "api     feat/api    src/api/**, tests/api/**\n"
        "docs    docs/guide  docs/**"
    )
    assert table(ROWS, HEADERS, None) == table(ROWS, HEADERS, 80)


def test_a_table_wider_than_the_terminal_is_one_block_per_row() -> None:
    assert table(ROWS, HEADERS, 30) == (
        "task api\n"
        "  branch  feat/api\n"
        "  claim   src/api/**, tests/api/**\n"
        "\n"
        "task docs\n"
        "  branch  docs/guide\n"
        "  claim   docs/**"
    )


@pytest.mark.parametrize(("columns", "width"), [("100", 100), ("0", None), ("wide", None), ("", None)])
def test_columns_is_honoured_through_a_pipe(monkeypatch: pytest.MonkeyPatch, columns: str, width: int | None) -> None:
    # pytest's stdout is not a terminal: only COLUMNS can give a width here.
    monkeypatch.setenv("COLUMNS", columns)
    assert terminal_width() == width
