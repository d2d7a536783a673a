"""Host input → codex ``UserInput`` items.

A host hands over a plain string, or OpenAI-style content parts (``text``/``input_text``,
``image_url``/``input_image`` with data:, http(s): or file: URLs, or local paths). Images stay
images: URLs become ``{"type": "image", "url"}`` and local files
``{"type": "localImage", "path"}`` — never a text marker the model cannot see. Input that cannot
be sent raises :class:`InputError` with a message that names the problem; nothing is silently
dropped.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, get_args
from urllib.parse import unquote, urlparse

from hermes_codex_runtime.protocol.schema_types import (
    ImageDetail,
    LocalImageUserInput,
    TextUserInput,
    UrlImageUserInput,
    UserInput,
)

IMAGE_DETAILS: frozenset[ImageDetail] = frozenset(get_args(ImageDetail))
MAX_DATA_URL_BYTES = 50 * 1024 * 1024
#: codex rejects a turn whose text input exceeds this many characters (verified on 0.163).
MAX_INPUT_CHARS = 1_048_576
_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_IMAGE_TYPES = frozenset({"image_url", "input_image", "image", "local_image", "localImage"})


class InputError(ValueError):
    """The host's input cannot be turned into codex input."""


def _text_item(text: str) -> TextUserInput:
    return {"type": "text", "text": text}


def _image_from_reference(ref: str, detail: Any,
                          base_dir: str | None) -> UrlImageUserInput | LocalImageUserInput:
    ref = ref.strip()
    if not ref:
        raise InputError("an image part has an empty URL/path")
    chosen = next((known for known in IMAGE_DETAILS if known == detail), None)
    lowered = ref[:12].lower()
    if lowered.startswith("data:"):
        if not lowered.startswith("data:image/"):
            raise InputError(f"a data URL image must be data:image/...; got {ref[:30]!r}")
        if len(ref) > MAX_DATA_URL_BYTES:
            raise InputError(
                f"an inline image is {len(ref) // (1024 * 1024)} MB; the limit is "
                f"{MAX_DATA_URL_BYTES // (1024 * 1024)} MB — attach it as a file instead"
            )
    elif lowered.startswith(("http://", "https://")):
        if not urlparse(ref).netloc:
            raise InputError(f"the image URL {ref[:80]!r} has no host")
    else:
        path = unquote(urlparse(ref).path) if lowered.startswith("file:") else ref
        path = os.path.expanduser(path)
        if not os.path.isabs(path):
            path = os.path.join(base_dir or os.getcwd(), path)
        if not os.path.isfile(path):
            raise InputError(f"the image file {path!r} does not exist")
        local: LocalImageUserInput = {"type": "localImage", "path": os.path.abspath(path)}
        if chosen is not None:
            local["detail"] = chosen
        return local
    remote: UrlImageUserInput = {"type": "image", "url": ref}
    if chosen is not None:
        remote["detail"] = chosen
    return remote


def _image_part(part: Mapping[str, Any],
                base_dir: str | None) -> UrlImageUserInput | LocalImageUserInput:
    raw = part.get("image_url", part.get("url", part.get("path")))
    detail = part.get("detail")
    if isinstance(raw, Mapping):
        detail = raw.get("detail", detail)
        raw = raw.get("url")
    if not isinstance(raw, str):
        raise InputError(f"an image part of type {part.get('type')!r} has no URL or path")
    return _image_from_reference(raw, detail, base_dir)


def to_user_input(content: Any, *, base_dir: str | None = None,
                  images: Iterable[str] = ()) -> list[UserInput]:
    """Map host input to ``UserInput`` items.

    ``content`` is a string or a list of content parts; ``images`` are extra image references
    (paths or URLs) a host attached beside the text. Raises :class:`InputError`.
    """
    items: list[UserInput] = []
    if content is None:
        pass
    elif isinstance(content, str):
        if content:
            items.append(_text_item(content))
    elif isinstance(content, Mapping):
        items.extend(to_user_input([content], base_dir=base_dir))
    elif isinstance(content, list | tuple):
        for index, part in enumerate(content):
            if isinstance(part, str):
                if part:
                    items.append(_text_item(part))
                continue
            if not isinstance(part, Mapping):
                raise InputError(f"content part {index} is a {type(part).__name__}, not an object")
            kind = part.get("type")
            if kind in _TEXT_TYPES or (kind is None and isinstance(part.get("text"), str)):
                text = part.get("text")
                if not isinstance(text, str):
                    raise InputError(f"content part {index} ({kind}) has no text")
                if text:
                    items.append(_text_item(text))
            elif kind in _IMAGE_TYPES:
                items.append(_image_part(part, base_dir))
            else:
                raise InputError(
                    f"content part {index} has the unsupported type {kind!r}; "
                    "codex accepts text and images"
                )
    else:
        raise InputError(f"cannot send a {type(content).__name__} to codex")
    for ref in images:
        items.append(_image_from_reference(ref, None, base_dir))
    if not items:
        raise InputError("the message is empty: there is nothing to send to codex")
    total = sum(len(item["text"]) for item in items if item["type"] == "text")
    if total > MAX_INPUT_CHARS:
        raise InputError(
            f"the message is {total:,} characters; codex accepts at most {MAX_INPUT_CHARS:,} per "
            "turn — attach long text as a file instead"
        )
    return items


def plain_text(content: Any) -> str:
    """The text of host input (text parts joined by newlines; images omitted)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    parts: list[str] = []
    if isinstance(content, list | tuple):
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
    return "\n".join(parts)
