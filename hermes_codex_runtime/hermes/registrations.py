"""The contexts Hermes' plugin loader registered the plugin with, in order (one per
plugin-manager load): the record that discovery through the entry point happened, which the
demo and the tests read. A leaf: it imports nothing."""

from __future__ import annotations

from typing import Any

REGISTRATIONS: list[Any] = []
