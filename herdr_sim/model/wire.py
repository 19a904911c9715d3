"""A brain's reply in each wire protocol: server-sent event streams (and plain JSON) as the agents parse them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# Streamed text arrives in pieces this long, like a model's tokens (agents must join deltas, not take the first).
CHUNK = 24


@dataclass(frozen=True)
class Call:
    """One tool call the model makes: an id the agent echoes back, the tool's name, its arguments."""

    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """What the model says in one response: some text, then any tool calls (none: the turn ends)."""

    text: str = ""
    calls: tuple[Call, ...] = field(default=())


def _pieces(text: str) -> list[str]:
    return [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]


def sse(event: str | None, data: Any) -> bytes:
    """One server-sent event (with an `event:` line when named)."""
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"{head}data: {payload}\n\n".encode()


def _usage_tokens(reply: Reply) -> int:
    return max(1, (len(reply.text) + sum(len(json.dumps(c.arguments)) for c in reply.calls)) // 4)


# --- Anthropic Messages ---


def anthropic_message(reply: Reply, model: str, message_id: str) -> dict[str, Any]:
    """The whole (non-streamed) Messages response."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text or not reply.calls else []
    content += [{"type": "tool_use", "id": c.call_id, "name": c.name, "input": c.arguments} for c in reply.calls]
    return {
        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": "tool_use" if reply.calls else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": _usage_tokens(reply)},
    }  # fmt: skip


def anthropic_stream(reply: Reply, model: str, message_id: str) -> Iterator[bytes]:
    """The Messages event stream: message_start, one block per text and tool call, message_delta, message_stop."""
    start = anthropic_message(Reply(), model, message_id) | {"content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": 100, "output_tokens": 1}
    yield sse("message_start", {"type": "message_start", "message": start})
    index = 0
    if reply.text or not reply.calls:
        yield sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
        for piece in _pieces(reply.text):
            yield sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}})
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    for call in reply.calls:
        block = {"type": "tool_use", "id": call.call_id, "name": call.name, "input": {}}
        yield sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
        for piece in _pieces(json.dumps(call.arguments)):
            yield sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "input_json_delta", "partial_json": piece}})
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    stop = "tool_use" if reply.calls else "end_turn"
    yield sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": _usage_tokens(reply)}})
    yield sse("message_stop", {"type": "message_stop"})


# --- OpenAI Chat Completions ---


def chat_completion(reply: Reply, model: str, completion_id: str, created: int) -> dict[str, Any]:
    """The whole (non-streamed) chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.calls:
        message["tool_calls"] = [{"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                                 for c in reply.calls]
    return {
        "id": completion_id, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.calls else "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": _usage_tokens(reply), "total_tokens": 100 + _usage_tokens(reply)},
    }  # fmt: skip


def chat_stream(reply: Reply, model: str, completion_id: str, created: int) -> Iterator[bytes]:
    """chat.completion.chunk events: role, text deltas, tool-call deltas, the finish reason, usage, then [DONE]."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(None, {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                          "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    if reply.text:
        for piece in _pieces(reply.text):
            yield chunk({"content": piece})
    for index, call in enumerate(reply.calls):
        yield chunk({"tool_calls": [{"index": index, "id": call.call_id, "type": "function",
                                     "function": {"name": call.name, "arguments": ""}}]})
        for piece in _pieces(json.dumps(call.arguments)):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if reply.calls else "stop")
    tokens = _usage_tokens(reply)
    yield sse(None, {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [],
                     "usage": {"prompt_tokens": 100, "completion_tokens": tokens, "total_tokens": 100 + tokens}})
    yield sse(None, "[DONE]")


# --- OpenAI Responses ---


def _responses_items(reply: Reply, response_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text or not reply.calls:
        items.append({"type": "message", "id": f"msg_{response_id}", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
    for n, call in enumerate(reply.calls):
        items.append({"type": "function_call", "id": f"fc_{response_id}_{n}", "call_id": call.call_id, "name": call.name,
                      "arguments": json.dumps(call.arguments), "status": "completed"})
    return items


def responses_object(reply: Reply, model: str, response_id: str, created: int, *, done: bool = True) -> dict[str, Any]:
    """The Responses `response` object (completed, or in progress with no output yet)."""
    tokens = _usage_tokens(reply)
    return {
        "id": response_id, "object": "response", "created_at": created, "status": "completed" if done else "in_progress",
        "model": model, "output": _responses_items(reply, response_id) if done else [], "error": None,
        "incomplete_details": None, "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": tokens,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 100 + tokens} if done else None,
    }  # fmt: skip


def responses_stream(reply: Reply, model: str, response_id: str, created: int) -> Iterator[bytes]:
    """response.* events: created, each output item added/streamed/done, then response.completed."""
    seq = iter(range(1_000_000))

    def event(name: str, data: dict[str, Any]) -> bytes:
        return sse(name, {"type": name, "sequence_number": next(seq), **data})

    yield event("response.created", {"response": responses_object(reply, model, response_id, created, done=False)})
    yield event("response.in_progress", {"response": responses_object(reply, model, response_id, created, done=False)})
    for index, item in enumerate(_responses_items(reply, response_id)):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.output_item.added", {"output_index": index, "item": item | {"status": "in_progress", "content": []}})
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", {"item_id": item["id"], "output_index": index, "content_index": 0, "part": part})
            for piece in _pieces(text):
                yield event("response.output_text.delta", {"item_id": item["id"], "output_index": index, "content_index": 0, "delta": piece})
            yield event("response.output_text.done", {"item_id": item["id"], "output_index": index, "content_index": 0, "text": text})
            yield event("response.content_part.done", {"item_id": item["id"], "output_index": index, "content_index": 0,
                                                       "part": part | {"text": text}})
        else:
            yield event("response.output_item.added", {"output_index": index, "item": item | {"status": "in_progress", "arguments": ""}})
            for piece in _pieces(item["arguments"]):
                yield event("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": index, "delta": piece})
            yield event("response.function_call_arguments.done", {"item_id": item["id"], "output_index": index,
                                                                  "arguments": item["arguments"]})
        yield event("response.output_item.done", {"output_index": index, "item": item})
    yield event("response.completed", {"response": responses_object(reply, model, response_id, created)})
