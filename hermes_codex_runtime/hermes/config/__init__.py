"""What the plugin reads from Hermes' configuration and home: its settings (:mod:`.settings`),
``config.yaml`` as a file (:mod:`.file`), what a turn takes from the files, read once
(:mod:`.standing`), the plugin's own paths (:mod:`.paths`), which runtime a message runs on
(:mod:`.activation`), model names (:mod:`.model_names`), and the Hermes places the sandbox walls
off and an approval protects (:mod:`.walled`, :mod:`.protected`).
"""
