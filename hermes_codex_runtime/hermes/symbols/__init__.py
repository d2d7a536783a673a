"""The Hermes symbols the adapter relies on: the feature probe that looks one up (:mod:`.probe`),
the one way a Hermes function is wrapped in place (:mod:`.patch`), one row of the list
(:mod:`.row`), the rows by area (:mod:`.seams`, :mod:`.agent`, :mod:`.display`) and the whole
table, the source of COMPAT_MANIFEST.md (:mod:`.table`).
"""
