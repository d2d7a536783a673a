"""Installing the plugin into a running Hermes: the seams, one feature-probed patch each
(:mod:`.seams`), and what happens the moment a Hermes module is imported (:mod:`.early`).
"""
