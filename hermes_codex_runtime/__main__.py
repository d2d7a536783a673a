"""``python -m hermes_codex_runtime``: the ``hermes-codex-runtime`` command, for a Hermes
environment whose scripts directory is not on ``PATH``."""

import sys

from hermes_codex_runtime.hermes.commands.cli import main

sys.exit(main())
