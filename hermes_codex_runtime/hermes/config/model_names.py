"""Which model names codex can run, as Hermes spells them.

Hermes names models the way its providers do: ``openai/gpt-5.5`` on an aggregator,
``anthropic/claude-sonnet-4`` on OpenRouter. With ``model.provider: openai-codex`` it strips
the vendor prefix, so a config.yaml carried over from another provider sends codex
``claude-sonnet-4`` — a name codex's provider refuses on every turn. This module owns the rule
both ``doctor`` and the turn apply: an ``openai/`` prefix is dropped, any other vendor's name
(by prefix or by family) is not a codex model, and says which setting fixes it.
"""

from __future__ import annotations

#: Model families that are never OpenAI's (lower-case name prefixes, after any ``vendor/``).
FOREIGN_FAMILIES = (
    "claude", "gemini", "gemma", "llama", "mistral", "mixtral", "codestral", "magistral",
    "ministral", "devstral", "qwen", "qwq", "deepseek", "grok", "kimi", "moonshot", "glm",
    "minimax", "command-r", "command-a", "phi-", "hermes-", "nous", "sonar", "ernie", "yi-",
    "nemotron", "olmo", "granite",
)


def codex_name(name: str) -> str:
    """``name`` as codex spells it: an ``openai/`` prefix dropped."""
    name = name.strip()
    return name.split("/", 1)[1] if name.lower().startswith("openai/") else name


def foreign_vendor(name: object) -> str | None:
    """The family or vendor of a model name that is not a codex model (``'anthropic'`` for
    ``anthropic/claude-sonnet-4``, ``'claude'`` for ``claude-sonnet-4``), else ``None``.
    Names codex may know through a custom provider of its own (``mock-model``, a local
    ``gpt-oss``) pass."""
    if not isinstance(name, str) or not name.strip():
        return None
    plain = codex_name(name)
    if "/" in plain:
        return plain.split("/", 1)[0]
    lower = plain.lower()
    return next((family.rstrip("-") for family in FOREIGN_FAMILIES if lower.startswith(family)),
                None)


def foreign_model_problem(name: str, configured: object = None) -> str:
    """One sentence: ``name`` (Hermes' model for the turn; ``configured``: config.yaml's
    ``model.default``, which may still carry the vendor prefix Hermes dropped) is another
    vendor's model, and how to pick a codex one."""
    shown = str(configured).strip() if isinstance(configured, str) and configured.strip() \
        and codex_name(configured).lower().endswith(name.strip().lower()) else name.strip()
    return (f"model {shown!r} is not an OpenAI model, and codex runs OpenAI's models only: set "
            "model.default to a codex model (`/model`, e.g. gpt-5.5), or pin one for codex "
            "turns with model.codex_model")
