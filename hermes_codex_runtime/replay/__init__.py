"""Codex Replay: re-run a recorded session through codex, durably, and compare.

A recorded session (one a host recorded, read through the host's :class:`~.sources.SessionSource`,
or a Claude Code transcript) is replayed with one or more codex variants (model, effort), each
in an isolated working copy at a chosen baseline and on its own codex thread, user turns in
order, unattended. Every run lives in its own directory; its state survives the process that
runs it, so a run can be cancelled, reconciled after a crash and resumed without running a
turn twice. The report compares the original with every variant: text, tool calls, tokens,
cost, and what changed on disk.

Layers (each imports only those before it; none imports a host — the host's CLI passes what
it knows in as plain values: its recorded sessions as a source of transcripts, and the
directories runs and controllers live in):

* :mod:`.sources` — the transcript a replay replays, the session-source contract, and the
  Claude Code reader (a host's own readers are its adapter's).
* :mod:`.store` — the run directory: state, log, per-turn records, path safety.
* :mod:`.workspace` — baselines and isolated working copies.
* :mod:`.plan` — what a run is: variants, turns, baseline, where codex runs.
* :mod:`.records` — one turn's record, and which failures are retried.
* :mod:`.engine` — variants × turns over :class:`~hermes_codex_runtime.session.CodexSession`.
* :mod:`.report` — ``report.json`` and the self-contained ``report.html``.
* :mod:`.control` — the operations (plan, start, cancel, resume, show, report).
* :mod:`.cleanup` — ``replay gc``.
* :mod:`.cli` — ``hermes-codex-runtime replay …``; :mod:`.tools`, :mod:`.mcp` and
  :mod:`.controller` — the same as MCP tools and a loopback web page.
"""
