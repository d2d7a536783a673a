"""The Hermes symbols the adapter relies on, third part: what a user sees while codex works —
the segment breaks of streamed text, the CLI's printer, the chat status that is edited in place,
and the API server's run stream that carries live output, plans and proposed diffs. One
:class:`~.row.HostSymbol` per row; :mod:`.table` lists them all.

Hermes has no event of its own for a tool's live output on either host line (its tools report
``tool.started``/``tool.completed``; the TUI gateway's ``agent.terminal.output`` is for
background processes only), none for a plan on the API stream (the TUI gateway's
``todo.updated`` is the shape borrowed) and none for a proposed diff: :mod:`..turn.surfaces` says
how each surface is reached instead.
"""

from __future__ import annotations

from hermes_codex_runtime.hermes.symbols.row import HostSymbol

DISPLAY_SYMBOLS: tuple[HostSymbol, ...] = (
    HostSymbol('run_agent', 'AIAgent().stream_delta_callback',
               '`None` closes the streamed segment before a tool or another message, as Hermes '
               'does before its tools (a chat finalizes the message, the CLI closes its '
               'reasoning and response boxes, the API stream drops it)',
               required=False,
               when_missing='commentary and the answer run together in a chat'),
    HostSymbol('run_agent', 'AIAgent()._stream_needs_break',
               'set after a segment: Hermes starts the next streamed text with a paragraph '
               'break, so a client joining `message.delta` sees two texts',
               required=False,
               when_missing='the texts are joined without a break'),
    HostSymbol('run_agent', 'AIAgent().status_callback',
               'chat status keyed `codex-plan` (the plan as a checklist), `codex-diff` (the '
               "turn's files), `codex-output:<call id>` (a running command's last lines, only "
               'where the adapter edits in place)',
               required=False,
               when_missing='no plan, diff or live output in a chat'),
    HostSymbol('run_agent', 'AIAgent._vprint',
               'the CLI (`platform` `cli`): a command\'s first lines, the plan checklist, '
               'proposed diffs, printed to its scrollback (`hermes chat -q` silences it)',
               required=False,
               when_missing='the CLI shows the tool lines only'),
    HostSymbol('gateway.run', '_send_or_update_status_coro',
               "routes `status_callback(key, text)` to the adapter's `send_or_update_status` "
               '(the previous bubble of that key is edited), else to a plain send',
               required=False,
               when_missing='live output is not sent to chats'),
    HostSymbol('gateway.run', '_gateway_runner_ref',
               "the running gateway, whose `adapters[platform]` tells whether the agent's "
               'platform edits status messages in place',
               required=False,
               when_missing='live output is not sent to chats'),
    HostSymbol('gateway.run', 'GatewayRunner().adapters',
               'the adapter of the agent\'s platform (see above)',
               required=False, checked=False,
               when_missing='live output is not sent to chats'),
    HostSymbol('plugins.platforms.telegram.adapter', 'TelegramAdapter.send_or_update_status',
               'Telegram edits a status bubble in place: live output is shown there',
               required=False,
               when_missing='no live output in Telegram chats'),
    HostSymbol('plugins.platforms.slack.adapter', 'SlackAdapter.send_or_update_status',
               'Slack edits a status message in place (the 0.22 line): live output is shown there',
               required=False, verified='0.22.2.post1',
               when_missing='no live output in Slack chats (0.19.0)'),
    HostSymbol('gateway.platforms.api_server', 'APIServerAdapter._make_run_event_callback',
               'the run stream (`GET /v1/runs/{id}/events`): its callback admits only '
               '`tool.started`, `tool.completed`, `reasoning.available` (and the 0.22 line\'s '
               '`subagent.*`); `tool.output`, `todo.updated` and `diff.proposed` go through the '
               'push it closes over (`_push`, with `run_id`: found by its `__qualname__` '
               '`…_make_run_event_callback.<locals>._callback`)',
               required=False,
               when_missing='live output, plans and proposed diffs stay off the API stream; '
               'reasoning and tool events still reach it'),
    # -- issue 49: approvals an OpenAI SDK client can read on the API server's streams
    HostSymbol('gateway.platforms.api_server', 'APIServerAdapter',
               'its import is when the chat-completions approvals below are made readable',
               required=False,
               when_missing='the API server is not there: nothing to make readable'),
    HostSymbol('gateway.platforms.api_server_openai_routes',
               'OpenAICompatRoutesMixin._register_stream_approval',
               "wrapped: the stream's queue it is given turns an `approval.request` into a "
               'well-formed `chat.completion.chunk` (empty delta; Hermes\' payload under '
               '`approval`, its fields at the top but `choices`, which the `openai` SDK reads '
               'as the chunk\'s), and a pending approval whose client went away is withdrawn',
               required=False, verified='0.22.2.post1',
               when_missing="Hermes' own event, which the `openai` SDK cannot read (0.19.0: its "
               'streaming chat completions carry no approval; a codex request there is '
               'declined at once)'),
    HostSymbol('tools.approval', 'has_blocking_approval',
               "whether a streaming completion's approval still waits (its client watched "
               'meanwhile)', required=False,
               when_missing='a gone client is noticed at Hermes\' next write (10 s)'),
    HostSymbol('tools.approval', 'resolve_gateway_approval',
               "a gone client's approval answered `deny` where it cannot be withdrawn",
               required=False,
               when_missing='it waits for `approvals.timeout`'),
)
