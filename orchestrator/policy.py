"""Organization policy overlays: TOML files matched by path prefix, layered default → organization → repository → plan."""

from __future__ import annotations

import os
import re
from functools import partial
from itertools import pairwise
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator

from orchestrator.config import dotted, read_toml, validation_problems
from orchestrator.errors import ConfigError
from orchestrator.layout import EXTRA_BRANCH_TYPES, HERDR_AGENT_KINDS, STANDARD_BRANCH_TYPES, quote
from packets import DEFAULT_MESSAGE_LIMIT, MESSAGE_LIMIT_RANGE

DEFAULT_SOURCE = "default"


class Policy(BaseModel):
    """The rules a plan is checked against; the defaults are the spec's (codex, the standard branch types)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_kind: str = "codex"
    allowed_kinds: tuple[str, ...] = ("claude", "codex", "opencode", "pi")
    branch_types: tuple[str, ...] = STANDARD_BRANCH_TYPES
    extra_branch_types: tuple[str, ...] = ()
    description_pattern: str | None = None
    trust_run_worktrees: bool = True
    trust_repository: bool = False
    message_limit_bytes: int = DEFAULT_MESSAGE_LIMIT


POLICY_FIELDS: tuple[str, ...] = tuple(Policy.model_fields)


class PolicyOverlay(BaseModel):
    """Some of the policy's values; what an overlay file or a plan's `[policy]` table sets (unset keeps the layer below)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    default_kind: StrictStr | None = None
    """Kind for workers that name none; default `codex`."""
    allowed_kinds: tuple[StrictStr, ...] | None = None
    """Kinds a worker may use; default `claude`, `codex`, `opencode`, `pi` (each must be a herdr agent kind)."""
    branch_types: tuple[StrictStr, ...] | None = None
    """Conventional Branch types allowed; default all eleven (`build chore ci docs feat fix perf refactor revert style test`); a policy may narrow them."""
    extra_branch_types: tuple[StrictStr, ...] | None = None
    """Extra types enabled for an established workflow, from `feature bugfix hotfix release ai copilot cursor claude codex`; default none."""
    description_pattern: StrictStr | None = None
    """Regular expression the branch description (after `<type>/`) must fully match, on top of lowercase kebab-case; default none."""
    trust_run_worktrees: StrictBool | None = None
    """Answer an agent's first-start trust dialog, with the agent's own keys, for a worktree this run created from the repository; default true. Off: the worker stops at the dialog, which is shown, and nothing is typed."""
    trust_repository: StrictBool | None = None
    """The person verified the repository (one owned by another user, which Git's ownership check refuses): herdr 0.9+ worktree commands then carry `--trust-repository`, trusting it for that request only, without touching Git's configuration; default false. Never set it to get past a refusal you have not looked into."""
    message_limit_bytes: StrictInt | None = Field(default=None, ge=MESSAGE_LIMIT_RANGE[0], le=MESSAGE_LIMIT_RANGE[1])
    """Largest inbound message a worker may send, in bytes (1024 to 1048576); default 65536 (a plan's `defaults.message_limit_bytes` overrides it)."""

    @field_validator("default_kind")
    @classmethod
    def _known_kind(cls, value: str | None) -> str | None:
        if value is not None and value not in HERDR_AGENT_KINDS:
            raise ValueError(f"{quote(value)} is not a herdr agent kind ({', '.join(HERDR_AGENT_KINDS)})")
        return value

    @field_validator("allowed_kinds")
    @classmethod
    def _known_kinds(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return _subset(value, HERDR_AGENT_KINDS, "a herdr agent kind", allow_empty=False)

    @field_validator("branch_types")
    @classmethod
    def _standard_types(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return _subset(value, STANDARD_BRANCH_TYPES, "a standard branch type", allow_empty=False)

    @field_validator("extra_branch_types")
    @classmethod
    def _extra_types(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return _subset(value, EXTRA_BRANCH_TYPES, "an extra branch type", allow_empty=True)

    @field_validator("description_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"{quote(value)} is not a valid regular expression: {exc}") from None
        return value


class OverlayFile(PolicyOverlay):
    """One overlay file: the path prefix it applies to, plus policy values."""

    applies_to: StrictStr
    """Path prefix (absolute or `~/…`) of the checkouts this overlay governs, e.g. `~/src/Feverup`."""


class PolicyLayer(BaseModel):
    """One layer of the effective policy and where it came from (shown as the source of the values it sets)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    overlay: PolicyOverlay


class EffectivePolicy(BaseModel):
    """The merged policy and, per field, the source of its value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: Policy
    sources: dict[str, str]
    layers: tuple[PolicyLayer, ...]


def _subset(value: tuple[str, ...] | None, known: tuple[str, ...], what: str, *, allow_empty: bool) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not value and not allow_empty:
        raise ValueError("must not be empty")
    unknown = [item for item in value if item not in known]
    if unknown:
        raise ValueError(f"{quote(unknown[0])} is not {what} ({', '.join(known)})")
    if len(set(value)) != len(value):
        raise ValueError("lists a value twice")
    return value


def expand_prefix(prefix: str, home: Path) -> Path | None:
    """An overlay's `applies_to` as an absolute, normalized path (`~` is HOME); None when it is relative."""
    path = home / prefix[2:] if prefix == "~" or prefix.startswith("~/") else Path(prefix)
    return Path(os.path.normpath(path)) if path.is_absolute() else None


def _locate(file: Path, loc: tuple[int | str, ...]) -> str:
    return f"{file}: {dotted(loc)}" if loc else str(file)


def load_overlays(policy_dir: Path, home: Path) -> list[tuple[Path, Path, OverlayFile]]:
    """Every `*.toml` in ``policy_dir`` as (file, absolute prefix, overlay), validated; a bad file is a ConfigError naming it."""
    if not policy_dir.is_dir():
        return []
    loaded: list[tuple[Path, Path, OverlayFile]] = []
    problems: list[str] = []
    for file in sorted(policy_dir.glob("*.toml")):
        try:
            data = read_toml(file, str(file))
        except ConfigError as exc:
            problems.append(exc.message)
            continue
        try:
            overlay = OverlayFile.model_validate(data)
        except ValidationError as exc:
            problems.extend(validation_problems(exc, partial(_locate, file)))
            continue
        prefix = expand_prefix(overlay.applies_to, home)
        if prefix is None:
            problems.append(f"{file}: applies_to: {quote(overlay.applies_to)} must be an absolute path or start with ~/")
            continue
        loaded.append((file, prefix, overlay))
    if problems:
        raise ConfigError("\n".join(problems))
    return loaded


def overlay_layers(checkout: Path, policy_dir: Path, home: Path) -> list[PolicyLayer]:
    """The overlays whose prefix contains ``checkout``, outermost (organization) first."""
    checkout = Path(os.path.normpath(checkout))
    matching = [(prefix, file, overlay) for file, prefix, overlay in load_overlays(policy_dir, home) if prefix == checkout or prefix in checkout.parents]
    matching.sort(key=lambda item: (len(item[0].parts), item[1].name))
    for (prefix_a, file_a, _), (prefix_b, file_b, _) in pairwise(matching):
        if prefix_a == prefix_b:
            raise ConfigError(f"{file_a} and {file_b} both apply to {prefix_a}; orch cannot tell which one overrides the other")
    return [
        PolicyLayer(source=file.name, overlay=PolicyOverlay.model_validate(overlay.model_dump(exclude={"applies_to"})))
        for _, file, overlay in matching
    ]


def merge_policy(layers: list[PolicyLayer]) -> EffectivePolicy:
    """Apply ``layers`` in order over the defaults; the result must be consistent (the default kind is allowed)."""
    values = Policy().model_dump()
    sources = dict.fromkeys(POLICY_FIELDS, DEFAULT_SOURCE)
    for layer in layers:
        for field, value in layer.overlay.model_dump(exclude_none=True).items():
            values[field] = value
            sources[field] = layer.source
    policy = Policy.model_validate(values)
    if policy.default_kind not in policy.allowed_kinds:
        raise ConfigError(
            f"policy: default_kind {quote(policy.default_kind)} (from {sources['default_kind']}) is not in allowed_kinds "
            f"{', '.join(policy.allowed_kinds)} (from {sources['allowed_kinds']})"
        )
    return EffectivePolicy(policy=policy, sources=sources, layers=tuple(layers))
