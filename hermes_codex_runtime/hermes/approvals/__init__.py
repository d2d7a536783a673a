"""codex's approval requests, decided the way Hermes decides its own (:mod:`.decide`) and asked
through Hermes' own prompt and channels (:mod:`.prompts`); on the API server's streaming chat
completions, sent as a chunk an OpenAI SDK client can read (:mod:`.api_stream`).
"""
