"""Settings read from the environment (state dir, policy dir, src root) and the shared edge for reading our TOML files."""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.errors import ConfigError
from orchestrator.locations import locations


class Settings(BaseModel):
    """Resolved locations; absolute paths, never read from anywhere but the environment given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    home: Path
    orch_home: Path
    policy_dir: Path
    src_root: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``env`` (default ``os.environ``); a relative override is a one-line ConfigError."""
        return cls(**locations(os.environ if env is None else env))


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_TOML_AT_END = re.compile(r"\s*\(at end of document\)$")


def read_text(path: Path, display: str) -> str:
    """A UTF-8 file's text (a leading BOM dropped); every way of not being readable is one ConfigError line (exit 1)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{display}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{display}: is a directory, not a file") from None
    except PermissionError:
        raise ConfigError(f"{display}: cannot read: permission denied") from None
    except OSError as exc:
        raise ConfigError(f"{display}: cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)
        line = raw.count(b"\n", 0, start) + 1
        column = start - (raw.rfind(b"\n", 0, start) + 1) + 1
        raise ConfigError(f"{display}:{line}:{column}: not UTF-8 (byte 0x{raw[start]:02x}); save the file as UTF-8") from None


def read_toml(path: Path, display: str) -> dict[str, Any]:
    """Parse a TOML file; a missing file or a syntax error is one ConfigError line `<display>:<line>:<col>: ...`."""
    text = read_text(path, display)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11's TOMLDecodeError has no position attributes; the position is only in the message.
        message = str(exc)
        if match := _TOML_POSITION.search(message):
            line, column = int(match[1]), int(match[2])
            message = message[: match.start()]
        else:
            lines = text.split("\n")
            line, column = len(lines), len(lines[-1]) + 1
            message = _TOML_AT_END.sub("", message)
        for pattern, plain in _TOML_WORDING:
            if pattern.match(message):
                message = plain
                break
        raise ConfigError(f"{display}:{line}:{column}: invalid TOML: {message}") from None


Locator = Callable[[tuple[int | str, ...]], str]


def validation_problems(exc: ValidationError, locate: Locator, *, model: type[BaseModel] | None = None) -> list[str]:
    """Translate a pydantic ValidationError into one `<where>: <what>` line per error, without pydantic's wording.

    With ``model`` (the model validated), an unknown key gets a "did you mean" from the fields allowed there.
    """
    return [text for _, text in located_problems(exc, locate, model=model)]


def located_problems(exc: ValidationError, locate: Locator, *, model: type[BaseModel] | None = None) -> list[tuple[tuple[int | str, ...], str]]:
    """validation_problems with each line's location in the document (pydantic's ``loc``), for a file line to be found."""
    problems: list[tuple[tuple[int | str, ...], str]] = []
    for error in exc.errors(include_url=False):
        if error["type"] == "too_short" and error.get("input"):
            continue  # pydantic's echo of item errors already reported one by one, not a real "empty" problem
        loc = tuple(error["loc"])
        where = locate(loc)
        what = _describe(error)
        if error["type"] == "extra_forbidden" and model is not None and loc and isinstance(loc[-1], str):
            import difflib  # only for a misspelt key: every command reads settings, few meet one

            close = difflib.get_close_matches(loc[-1], fields_at(model, loc[:-1]), n=1, cutoff=0.6)
            if close:
                what += f"; did you mean `{close[0]}`?"
        problems.append((loc, f"{where}: {what}" if where else what))
    return problems


def fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names allowed at ``loc`` inside ``model`` (through nested models and lists of them), else []."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue  # an index into a list: the item type is what the field named before it holds
        fields = getattr(current, "model_fields", None)
        if not isinstance(fields, dict) or part not in fields:
            return []
        current = _model_in(fields[part].annotation)
        if current is None:
            return []
    fields = getattr(current, "model_fields", None)
    return list(fields) if isinstance(fields, dict) else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def dotted(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic location as `a.b[2].c`."""
    out = ""
    for part in loc:
        if part == "[key]":
            continue  # pydantic's mark for a bad key of a table: the key itself already ends the location
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# pydantic's type errors in the words of a TOML file ("must be a valid tuple" names a Python type nobody wrote).
_PLAIN_TYPES = {
    "tuple_type": 'must be a list, like ["a", "b"]',
    "list_type": 'must be a list, like ["a", "b"]',
    "string_type": 'must be text in quotes, like "text"',
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "model_type": "must be a table",
    "model_attributes_type": "must be a table",
    "dict_type": "must be a table",
}

# tomllib's messages that name a character rather than the mistake a person made.
_TOML_WORDING = (
    (re.compile(r"^Illegal character '\\n'$"), "a line ends inside a quoted string (is a closing quote missing?)"),
    (re.compile(r"^Unclosed array$"), 'a list is not closed (is a "]" or a comma missing?)'),
    (re.compile(r"^Unclosed inline table$"), 'an inline table is not closed (is a "}" missing?)'),
    (re.compile(r"^Expected '=' after a key in a key/value pair$"), 'expected "=" after the key (a key with spaces needs quotes)'),
    (re.compile(r"^Cannot (?:overwrite|declare) .*"), "a key or table is written twice"),
)


def _describe(error: Any) -> str:
    kind, value = error["type"], error.get("input")
    message: str = error["msg"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field"
    if kind in ("value_error", "assertion_error"):
        return str(message).split(", ", 1)[1] if ", " in message else str(message)
    if kind in _PLAIN_TYPES:
        message = _PLAIN_TYPES[kind]
    elif kind == "literal_error":
        message = "must be " + str(error["ctx"]["expected"]).replace("'", '"')
    elif message.startswith("Input should be "):
        message = "must be " + message.removeprefix("Input should be ")
    elif kind in ("too_short", "string_too_short"):
        least = error.get("ctx", {}).get("min_length", 1)
        message = "must not be empty" if least == 1 else f"must have at least {least} {'items' if kind == 'too_short' else 'characters'}"
    elif kind == "string_too_long":
        most = error.get("ctx", {}).get("max_length")
        size = len(value) if isinstance(value, str) else None
        return f"is {size} characters long; at most {most} are allowed" if size is not None else f"must have at most {most} characters"
    elif kind == "too_long":
        most = error.get("ctx", {}).get("max_length")
        size = error.get("ctx", {}).get("actual_length")
        return f"has {size} items; at most {most} are allowed" if size is not None else f"must have at most {most} items"
    if isinstance(value, str) and len(value) > 80:
        value = value[:77] + "..."  # a long value is named, not echoed whole
    if isinstance(value, str | int | float | bool) and kind not in ("string_too_short", "too_short"):
        message += f", got {json.dumps(value, ensure_ascii=False)}"
    return message
