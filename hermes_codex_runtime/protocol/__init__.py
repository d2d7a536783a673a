"""The protocol layer: pure data in, pure data out — no I/O, no threads, no processes.

Request builders (:mod:`.requests`), host input mapping (:mod:`.inputs`), server-request answers
(:mod:`.answers`), notification scope (:mod:`.scope`) and failure classification
(:mod:`.failures`).
"""

from hermes_codex_runtime.protocol.answers import (
    APPROVAL_METHODS,
    METHOD_NOT_FOUND,
    Decision,
    answer_for,
    approval_kind,
    default_answer,
    safe_answer,
)
from hermes_codex_runtime.protocol.failures import (
    Failure,
    FailureKind,
    classify,
    classify_error_notification,
    invalid_configuration,
    login_missing,
)
from hermes_codex_runtime.protocol.history import history_items
from hermes_codex_runtime.protocol.inputs import InputError, plain_text, to_user_input
from hermes_codex_runtime.protocol.requests import (
    UNUSED_NOTIFICATIONS,
    account_read_params,
    compact_start_params,
    sandbox_policy,
    thread_fork_params,
    thread_inject_items_params,
    thread_resume_params,
    thread_revert_params,
    thread_settings,
    thread_start_params,
    turn_interrupt_params,
    turn_start_params,
    turn_steer_params,
)
from hermes_codex_runtime.protocol.scope import Scope, scope_of
from hermes_codex_runtime.protocol.tools import HostTool, HostToolCall, HostToolOutput

__all__ = [
    "APPROVAL_METHODS",
    "METHOD_NOT_FOUND",
    "UNUSED_NOTIFICATIONS",
    "Decision",
    "Failure",
    "FailureKind",
    "HostTool",
    "HostToolCall",
    "HostToolOutput",
    "InputError",
    "Scope",
    "account_read_params",
    "answer_for",
    "approval_kind",
    "classify",
    "classify_error_notification",
    "compact_start_params",
    "default_answer",
    "history_items",
    "invalid_configuration",
    "login_missing",
    "plain_text",
    "safe_answer",
    "sandbox_policy",
    "scope_of",
    "thread_fork_params",
    "thread_inject_items_params",
    "thread_resume_params",
    "thread_revert_params",
    "thread_settings",
    "thread_start_params",
    "to_user_input",
    "turn_interrupt_params",
    "turn_start_params",
    "turn_steer_params",
]
