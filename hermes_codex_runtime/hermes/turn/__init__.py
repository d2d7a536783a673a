"""One Hermes turn on codex: the seam's replacement (:mod:`.run`), the runtime's hooks for an
``AIAgent`` (:mod:`.hooks`) with what a turn knows (:mod:`.state`), its events, live output and
surfaces, its books (:mod:`.accounting`, :mod:`.epilogue`), the fallback, instruction files, the
thread binding, the user's controls, how long a session lives, the process-wide runtime
(:mod:`.runtime`) and the background review.
"""
