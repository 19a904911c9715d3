"""The server error object (kept apart from the engine so the CLI can catch it without importing pydantic)."""

from __future__ import annotations


class ApiError(Exception):
    """A server error object: code and message, printed as JSON err with exit 1."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
