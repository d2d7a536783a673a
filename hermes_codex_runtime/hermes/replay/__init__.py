"""What Codex Replay reads from Hermes: its recorded sessions (:mod:`.sessions`) and the plugin's
settings as plain values (:mod:`.context`).
"""
