"""What an agent sent, read from any of the three wire protocols into one shape the brains understand."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class UserText:
    """Text the person (or orch, through the terminal) typed, or the agent's own framing around it."""

    text: str


@dataclass(frozen=True)
class AssistantText:
    """Text the model said earlier in the conversation."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made earlier: its id, tool name and arguments (decoded JSON, or raw text)."""

    call_id: str
    name: str
    arguments: Any


@dataclass(frozen=True)
class ToolResult:
    """What the agent reported back for one tool call (its output, flattened to text)."""

    call_id: str
    text: str


Item = UserText | AssistantText | ToolCall | ToolResult


@dataclass(frozen=True)
class Tool:
    """One tool the agent offers: its name and the JSON schema of its arguments."""

    name: str
    schema: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Conversation:
    """One request, protocol aside: the system text, the turns in order, the tools offered, and the model asked for."""

    protocol: str  # "anthropic", "responses" or "chat"
    model: str
    system: str
    items: tuple[Item, ...]
    tools: tuple[Tool, ...]
    stream: bool


class WireError(ValueError):
    """A request body that is not the protocol's shape; str() is one line."""


def _text_of(content: Any) -> str:
    """Text of a content value: a string, or a list of blocks whose text parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and "content" in block:
                parts.append(_text_of(block["content"]))
        return "\n".join(parts)
    if isinstance(content, dict):
        return _text_of([content])
    return str(content)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
    return raw


def _require(body: Any, key: str, kind: type) -> Any:
    if not isinstance(body, dict) or not isinstance(body.get(key), kind):
        raise WireError(f"request has no {key} ({kind.__name__})")
    return body[key]


def from_anthropic(body: Any) -> Conversation:
    """An Anthropic Messages request (`POST /v1/messages`)."""
    messages = _require(body, "messages", list)
    items: list[Item] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                items.append(UserText(block["text"]) if role == "user" else AssistantText(block["text"]))
            elif kind == "tool_use":
                items.append(ToolCall(str(block.get("id", "")), str(block.get("name", "")), block.get("input", {})))
            elif kind == "tool_result":
                items.append(ToolResult(str(block.get("tool_use_id", "")), _text_of(block.get("content"))))
    tools = tuple(Tool(str(t.get("name", "")), t.get("input_schema") or {}) for t in body.get("tools") or [] if isinstance(t, dict))
    return Conversation("anthropic", str(body.get("model", "")), _text_of(body.get("system")), tuple(items), tools,
                        bool(body.get("stream")))


def from_chat(body: Any) -> Conversation:
    """An OpenAI Chat Completions request (`POST /v1/chat/completions`)."""
    messages = _require(body, "messages", list)
    items: list[Item] = []
    system = []
    for message in messages:
        role = message.get("role")
        text = _text_of(message.get("content"))
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            items.append(UserText(text))
        elif role == "assistant":
            if text:
                items.append(AssistantText(text))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                items.append(ToolCall(str(call.get("id", "")), str(function.get("name", "")), _arguments(function.get("arguments"))))
        elif role == "tool":
            items.append(ToolResult(str(message.get("tool_call_id", "")), text))
    tools = tuple(Tool(str((t.get("function") or {}).get("name", "")), (t.get("function") or {}).get("parameters") or {})
                  for t in body.get("tools") or [] if isinstance(t, dict))
    return Conversation("chat", str(body.get("model", "")), "\n".join(system), tuple(items), tools, bool(body.get("stream")))


def from_responses(body: Any) -> Conversation:
    """An OpenAI Responses request (`POST /v1/responses`)."""
    raw = body.get("input") if isinstance(body, dict) else None
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise WireError("request has no input (list)")
    items: list[Item] = []
    system = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    for item in raw:
        kind = item.get("type", "message")
        if kind == "message":
            role, text = item.get("role"), _text_of(item.get("content"))
            if role in ("system", "developer"):
                system.append(text)
            elif role == "user":
                items.append(UserText(text))
            else:
                items.append(AssistantText(text))
        elif kind in ("function_call", "custom_tool_call"):
            items.append(ToolCall(str(item.get("call_id", "")), str(item.get("name", "")),
                                  _arguments(item.get("arguments", item.get("input")))))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            items.append(ToolResult(str(item.get("call_id", "")), _text_of(item.get("output"))))
    tools = tuple(Tool(str(t.get("name", "")), t.get("parameters") or {}) for t in body.get("tools") or []
                  if isinstance(t, dict) and t.get("type") == "function")
    return Conversation("responses", str(body.get("model", "")), "\n".join(system), tuple(items), tools, bool(body.get("stream")))
