"""Fixtures for the packets tests: golden files that ORCH_UPDATE_GOLDEN=1 rewrites instead of comparing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"


class Golden:
    """Compare text with a golden file byte for byte, or rewrite the file when ORCH_UPDATE_GOLDEN=1."""

    def __init__(self, directory: Path, update: bool) -> None:
        self.directory = directory
        self.update = update

    def check(self, name: str, text: str) -> None:
        path = self.directory / name
        if self.update:
            path.write_bytes(text.encode("utf-8"))
            return
        assert path.is_file(), f"golden file {path} is missing; run with ORCH_UPDATE_GOLDEN=1 to create it"
        assert text == path.read_bytes().decode("utf-8")


@pytest.fixture
def golden() -> Golden:
    """The packets golden directory, in update mode when ORCH_UPDATE_GOLDEN=1."""
    return Golden(GOLDEN_DIR, os.environ.get("ORCH_UPDATE_GOLDEN") == "1")
