"""codex's approval requests, decided the way Hermes decides its own (:mod:`.decide`) and asked
through Hermes' own prompt and channels (:mod:`.prompts`).
"""
