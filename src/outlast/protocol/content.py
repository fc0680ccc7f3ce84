"""The text of an AG-UI message's ``content``, whatever its shape."""

from __future__ import annotations

from typing import Any


def text_of(content: Any) -> str:
    """A string content as is; of multimodal parts, the text parts joined; else ''."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""
