"""Regenerating a marked block inside a hand-written document (COMPAT_MANIFEST.md's host table,
the README's benchmark table): everything outside the markers is left as the author wrote it."""

from __future__ import annotations


def replace_block(text: str, begin: str, end: str, body: str, *, opening: str | None = None,
                  what: str = "the document") -> str:
    """``text`` with the block between the first line starting ``opening`` (default: ``begin``)
    and ``end`` replaced by ``begin + body + end``. Raises ``ValueError`` naming ``what`` when
    the markers are missing."""
    head, found, rest = text.partition(opening or begin)
    if not found:
        raise ValueError(f"{what} has no generated block")
    _, found, tail = rest.partition(end)
    if not found:
        raise ValueError(f"{what}'s generated block is not closed")
    return head + begin + body + end + tail
