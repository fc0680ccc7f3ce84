"""The chat-completions wire format: request messages, usage, secret scrubbing."""

from __future__ import annotations

from outlast.agents.openai.wire import NO_RESULT, Usage, scrub, to_openai
from outlast.agents.resume import finished


def call(call_id: str, name: str = "f", args: str = "{}") -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def test_tool_call_messages_have_empty_string_content_never_null() -> None:
    out = to_openai([
        {"id": "u", "role": "user", "content": "hi"},
        {"id": "a", "role": "assistant", "toolCalls": [call("c1")]},
        {"id": "r", "role": "tool", "toolCallId": "c1", "content": "ok"},
    ], system_prompt="sys")
    assert out == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]


UNFINISHED = [
    {"id": "u", "role": "user", "content": "hi"},
    {"id": "a", "role": "assistant", "content": "half an ans",
     "metadata": {"finishReason": "interrupted"}, "toolCalls": [call("c1")]},
    {"id": "r", "role": "tool", "toolCallId": "c1", "content": "interrupted"},
    {"id": "b", "role": "assistant", "content": "streaming...",
     "metadata": {"finishReason": "streaming"}},
    {"id": "e", "role": "assistant", "content": "failed", "metadata": {"finishReason": "error"}},
    {"id": "c", "role": "assistant", "content": "cut by length",
     "metadata": {"finishReason": "length"}},
]


def test_unfinished_replies_and_their_results_are_left_out() -> None:
    assert to_openai(UNFINISHED) == [{"role": "user", "content": "hi"},
                                     {"role": "assistant", "content": "cut by length"}]


def test_every_host_leaves_out_the_same_unfinished_replies() -> None:
    """The framework hosts' histories go through ``finished``: what it leaves out is what
    the chat wire leaves out."""
    assert [m["id"] for m in finished(UNFINISHED)] == ["u", "c"]


def test_unanswered_calls_get_a_placeholder_and_orphans_are_dropped() -> None:
    out = to_openai([
        {"id": "a", "role": "assistant", "content": "x", "toolCalls": [call("c1"), call("c2")]},
        {"id": "r2", "role": "tool", "toolCallId": "c2", "content": "two"},
        {"id": "r9", "role": "tool", "toolCallId": "c9", "content": "orphan"},
        {"id": "u", "role": "user", "content": [{"type": "text", "text": "moved on"}]},
    ])
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in out] == [
        ("assistant", None, "x"), ("tool", "c1", NO_RESULT), ("tool", "c2", "two"),
        ("user", None, "moved on")]


def test_usage_sums_reported_counts_only() -> None:
    usage = Usage()
    usage.add(None)
    usage.add({"unrelated": 1})
    assert usage.to_json() is None
    usage.add({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
    usage.add({"prompt_tokens": 1, "completion_tokens": 1})
    assert usage.to_json() == {"inputTokens": 4, "outputTokens": 3, "totalTokens": 7}


def test_scrub_strips_keys_and_bearer_tokens() -> None:
    text = ('{"error": "bad key sk-abcdefghijkl", "auth": "Bearer eyJhbGciOi.xyz", '
            '"api_key": "k-123", "mine": "SECRET-VALUE"}')
    cleaned = scrub(text, "SECRET-VALUE")
    for secret in ("sk-abcdefghijkl", "eyJhbGciOi.xyz", "k-123", "SECRET-VALUE"):
        assert secret not in cleaned
    assert "bad key" in cleaned
