"""A scripted agent for the mock provider that makes replays comparable: its answers depend on
the model codex asked for and on the user's message, and some messages make it use codex's shell
tool — so a recorded session has tool calls, and each replay variant leaves its own change on
disk:

* a message that mentions "notes": every model writes ``notes.txt`` (its own name inside);
* "run a shell command": ``mock-model`` runs ``echo``, any other model does the sum with
  ``expr`` instead, and each says what its command printed;
* "create NAME": ``mock-model`` writes NAME, any other model writes a Markdown file beside it
  (``hello.txt`` → ``hello.md``) and says it chose another file.

So the demo's replay on a second model shows changed answers, other tool calls and another
working-copy diff. Used by the replay tests, ``make demo`` and the replay benchmark.
"""

from __future__ import annotations

import re
from typing import Any

from hermes_codex_runtime.offline import provider as mp

NOTES_FILE = "notes.txt"
FIRST_MODEL = "mock-model"
_CREATE = re.compile(r"\bcreate\s+([A-Za-z0-9_.-]+\.[A-Za-z0-9]+)", re.IGNORECASE)
_ANSWER = re.compile(r"the answer is -?\d+")


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the newest user message in a Responses request (codex's own context
    messages, which start with ``<``, are skipped)."""
    for item in reversed(body.get("input") or []):
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        content = item.get("content")
        parts = [content] if isinstance(content, str) else [
            str(p.get("text") or "") for p in content or [] if isinstance(p, dict)]
        text = "\n".join(p for p in parts if p).strip()
        if text and not text.startswith("<"):
            return text
    return ""


def after_tool(body: dict[str, Any]) -> bool:
    """Whether the request follows a tool call (its last input item is a tool result)."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    return bool(items) and items[-1].get("type") in ("function_call_output",
                                                     "custom_tool_call_output")


def tool_output(body: dict[str, Any]) -> str:
    """The output of the tool call the request follows (``""`` when there is none)."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    if not items or items[-1].get("type") not in ("function_call_output",
                                                  "custom_tool_call_output"):
        return ""
    output = items[-1].get("output")
    if isinstance(output, list):
        return "\n".join(str(p.get("text") or "") for p in output if isinstance(p, dict))
    return str(output or "")


def _other_file(name: str) -> str:
    stem = name.rsplit(".", 1)[0]
    return f"{stem}.md" if not name.endswith(".md") else f"{stem}.txt"


def _task(text: str) -> tuple[str | None, str]:
    """What a user message asks for: ``("notes"|"shell"|"create"|None, the file named)``."""
    lower = text.lower()
    created = _CREATE.search(text)
    if "notes" in lower:
        return "notes", NOTES_FILE
    if "shell command" in lower:
        return "shell", ""
    return ("create", created.group(1)) if created else (None, "")


def agent(body: dict[str, Any]) -> mp.Reply:
    """The scripted answer to one request."""
    model = str(body.get("model") or "?")
    first = model == FIRST_MODEL
    text = last_user_text(body)
    usage = mp.Usage(input=1200, cached=400, output=80, reasoning=16)
    task, name = _task(text)
    if after_tool(body):
        if task == "shell":
            printed = _ANSWER.search(tool_output(body))
            said = printed.group(0) if printed else "nothing"
            return mp.text(f"[{model}] The command printed: {said}." if first else
                           f"[{model}] I did the sum with expr instead; it printed: {said}.",
                           usage=usage)
        if task == "create":
            return mp.text(f"[{model}] I created {name}." if first else
                           f"[{model}] I wrote {_other_file(name)} instead of {name}: a "
                           "Markdown file reads better.", usage=usage)
        return mp.text(f"[{model}] I wrote {NOTES_FILE}." if task == "notes" else
                       f"[{model}] Done.", usage=usage)
    if task == "notes":
        return mp.exec_command(f"printf '%s\\n' 'notes by {model}' > {NOTES_FILE}",
                               usage=usage)
    if task == "shell":
        return mp.exec_command("echo the answer is $((6*7))" if first else
                               "echo the answer is $(expr 6 '*' 7)", usage=usage)
    if task == "create":
        return mp.exec_command(f"printf '%s\\n' 'Hello from {model}!' > {name}" if first else
                               f"printf '%s\\n' '# Hello' '' 'From {model}.' > "
                               f"{_other_file(name)}", usage=usage)
    return mp.text(f"[{model}] You said: {text[:80]}", usage=usage)
