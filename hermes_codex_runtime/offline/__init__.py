"""codex with no network, for the demo, the playground, the walls' proof and the tests: a model
provider on 127.0.0.1 that speaks the Responses API (:mod:`.provider`), a ``CODEX_HOME`` that
points codex at it (:mod:`.codex_home`), a chat-completions stand-in for a host's own model
(:mod:`.chat`), and the scripted model of replays (:mod:`.replay_script`). Production code:
``testing/`` builds on it, never the other way.
"""
