"""What a Hermes user runs: the slash commands (:mod:`.slash`), the ``hermes-codex-runtime``
command (:mod:`.cli`) with enable/disable (:mod:`.switch`, :mod:`.provider_switch`), ``codex``,
``doctor`` (:mod:`.doctor`, :mod:`.wall_report`), ``status``, ``demo`` (:mod:`.demo`,
:mod:`.demo_story`), ``try`` (:mod:`.trial`) and the offline caches they write
(:mod:`.offline`).
"""
