"""The places in the Hermes home that codex writes into, kept private to the user.

The codex app-server inherits Hermes' temp directories (``TMPDIR``/``TMP``/``TEMP``: the 0.22
line points them at its scratch directory, ``$HERMES_HOME/cache/scratch``) and writes its home
(``model.codex_home``, which a user may keep in the Hermes home). What codex creates there
follows its umask — 0644 for its sandbox's lock, its rollouts and databases — while everything
the plugin writes is 0600. :func:`places` names those of the directories codex gets that lie in
the Hermes home (or, for a profile, in the root above it); :func:`keep_private` gives each the
runtime's private default ACL (:mod:`hermes_codex_runtime.wire.private_dirs`) before a thread
runs, so what codex and its commands create there is private whatever the umask, while the
files commands write in the workspace keep the user's umask. A place where that cannot be done
is logged once per process, with the reason.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

from hermes_codex_runtime.hermes.config.settings import PluginSettings
from hermes_codex_runtime.hermes.config.walled import hermes_roots
from hermes_codex_runtime.wire.codex_config import codex_home_path
from hermes_codex_runtime.wire.private_dirs import keep_new_files_private

log = logging.getLogger("hermes_codex_runtime.hermes")

#: The temp directories codex inherits (the app-server's allow-list passes them on).
TEMP_VARIABLES = ("TMPDIR", "TMP", "TEMP")
_warned: set[tuple[str, str]] = set()


def places(plugin: PluginSettings, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The directories codex is given that lie in the Hermes home (resolved, each once; there
    or not yet)."""
    env = os.environ if environ is None else environ
    roots = [os.path.realpath(root) for root in hermes_roots()]
    given = [env.get(name, "") for name in TEMP_VARIABLES]
    given.append(str(codex_home_path(plugin.codex_home, env)))
    found: list[str] = []
    for path in given:
        if not path:
            continue
        real = os.path.realpath(path)
        if real not in found and any(real == root or real.startswith(root + os.sep)
                                     for root in roots):
            found.append(real)
    return tuple(found)


def keep_private(directories: Iterable[str]) -> None:
    """Make what is created in each directory private (see the module); say once per process
    for each place where it cannot be done, and why."""
    for directory in directories:
        if not os.path.isdir(directory):
            continue  # codex makes nothing there yet: the next thread looks again
        reason = keep_new_files_private(directory)
        if reason is not None and (directory, reason) not in _warned:
            _warned.add((directory, reason))
            log.warning("codex-runtime: files codex writes in %s keep the umask, so other users "
                        "may read them: %s", directory, reason)
