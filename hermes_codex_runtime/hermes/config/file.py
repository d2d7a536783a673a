"""Hermes' ``config.yaml`` as a file: where it is, whether it parses, and changing a few keys of
it without losing anything.

* :func:`config_path` — the file Hermes reads (``$HERMES_HOME/config.yaml``), named in every fix;
* :func:`read_config_file` — its contents, or a :class:`ConfigFileError` that says where the YAML
  breaks (file, line, column, the parser's own words);
* :func:`update_config_file` — the one place the plugin writes it: never a file it cannot parse,
  a timestamped backup first, then an atomic replace that keeps the file's mode.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class ConfigFileError(ValueError):
    """``config.yaml`` exists but is not a YAML mapping Hermes could use."""

    def __init__(self, path: Path, problem: str, line: int | None = None,
                 column: int | None = None) -> None:
        self.path, self.problem, self.line, self.column = path, problem, line, column
        where = f"{path}:{line}:{column}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")


def config_path() -> Path:
    """``$HERMES_HOME/config.yaml`` as Hermes resolves it."""
    from hermes_codex_runtime.hermes.config.settings import hermes_home

    return hermes_home() / "config.yaml"


def read_config_file(path: Path | None = None) -> dict[str, Any] | None:
    """The file's mapping; ``None`` when there is no file. Raises :class:`ConfigFileError`."""
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(path, f"cannot be read ({exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        words = " ".join(str(p) for p in (exc.context, exc.problem) if p) or str(exc)
        raise ConfigFileError(path, words, mark.line + 1 if mark else None,
                              mark.column + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise ConfigFileError(path, str(exc)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(path, f"the top level is a {type(data).__name__}, not a mapping "
                              "of settings")
    return data


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """What :func:`update_config_file` did: the changed keys, as lines for a person."""

    path: Path
    lines: tuple[str, ...]
    backup: Path | None = None
    comments_dropped: bool = False


def update_config_file(edit: Callable[[dict[str, Any]], list[str]], *,
                       path: Path | None = None, dry_run: bool = False) -> ConfigChange:
    """Apply ``edit`` (which changes the mapping in place and says what it changed) and write the
    file back — unless nothing changed or ``dry_run``. Raises :class:`ConfigFileError` for a
    file that does not parse: it is never rewritten."""
    path = path or config_path()
    data = read_config_file(path)
    existed = data is not None
    data = data if data is not None else {}
    lines = tuple(edit(data))
    if not lines or dry_run:
        return ConfigChange(path, lines)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
    backup = None
    comments = False
    mode = 0o600
    if existed:
        original = path.read_text(encoding="utf-8")
        comments = any(line.lstrip().startswith("#") or " #" in line
                       for line in original.splitlines())
        mode = path.stat().st_mode & 0o777
        backup = path.with_name(f"{path.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
        suffix = 1
        while backup.exists():
            backup = path.with_name(f"{path.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}-{suffix}")
            suffix += 1
        shutil.copy2(path, backup)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(prefix=".config.yaml.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(scratch, mode)
        os.replace(scratch, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise
    return ConfigChange(path, lines, backup, comments)
