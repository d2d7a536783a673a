"""Finding the codex binary and checking its version.

Lookup order: an explicit setting (the host's), then ``$CODEX_BIN``, then the binary bundled by
the ``openai-codex-cli-bin`` package (``codex_cli_bin``), then ``PATH``. Every failure is a
:class:`CodexBinaryError` whose ``fix`` says what to do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from hermes_codex_runtime.wire.errors import CodexBinaryError

MIN_CODEX_VERSION: tuple[int, int, int] = (0, 125, 0)
#: The codex versions the test suite runs on (PyPI ``openai-codex-cli-bin``; npm
#: ``@openai/codex``). Versions in between and newer are allowed; doctor says which these are.
TESTED_CODEX_VERSIONS: tuple[tuple[int, int, int], ...] = ((0, 169, 0), (0, 171, 0))


def tested_note(version: tuple[int, int, int]) -> str:
    """How ``version`` relates to the tested ones, e.g. ``tested`` or ``newer than tested``."""
    tested = ", ".join(format_version(v) for v in TESTED_CODEX_VERSIONS)
    if version in TESTED_CODEX_VERSIONS:
        return f"a tested version (tested: {tested})"
    if version > max(TESTED_CODEX_VERSIONS):
        return f"newer than the tested versions (tested: {tested})"
    return f"not one of the tested versions (tested: {tested})"

#: Host-neutral: a host adds where ITS setting lives (its adapter names its own key).
INSTALL_HINT = (
    "Install codex (`pip install openai-codex-cli-bin`, or npm `@openai/codex`), or point the "
    "codex binary setting (or $CODEX_BIN) at its full path."
)
SETTING_LABEL = "the codex binary setting"

_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class CodexBinary:
    """A resolved codex executable: its path, where the setting came from, and the directory of
    helper binaries (``rg``) to put first on ``PATH`` when it is the bundled one."""

    path: str
    source: str  # "setting" | "CODEX_BIN" | "bundled" | "PATH"
    path_prepend: str | None = None


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``"codex-cli 0.163.0"`` or a userAgent ``"codex_cli_rs/0.163.0 (...)"`` → ``(0, 163, 0)``."""
    if not text:
        return None
    if "/" in text:
        text = text.split("/", 1)[1]
    match = _VERSION_RE.search(text)
    if match is None:
        return None
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def format_version(version: tuple[int, int, int]) -> str:
    """``(0, 163, 0)`` → ``"0.163.0"``."""
    return ".".join(str(part) for part in version)


def _bundled() -> CodexBinary | None:
    try:
        import codex_cli_bin
    except ImportError:
        return None
    try:
        path = str(codex_cli_bin.bundled_codex_path())
        helpers = str(codex_cli_bin.bundled_path_dir())
    except Exception:
        return None
    if not os.path.isfile(path):
        return None
    return CodexBinary(path=path, source="bundled", path_prepend=helpers)


def _check_runnable(path: str, source: str) -> str:
    label = SETTING_LABEL if source == "setting" else source
    if os.path.isdir(path):
        raise CodexBinaryError(
            f"The codex binary from {label} ({path!r}) is a directory, not a program.",
            INSTALL_HINT,
        )
    if os.sep in path or (os.altsep and os.altsep in path):
        if not os.path.exists(path):
            raise CodexBinaryError(f"The codex binary from {label} ({path!r}) does not exist.",
                                   INSTALL_HINT)
        if not os.access(path, os.X_OK):
            raise CodexBinaryError(
                f"The codex binary from {label} ({path!r}) is not executable.",
                f"Run `chmod +x {path}` or point {label} at the right file.",
            )
        return os.path.abspath(path)
    found = shutil.which(path)
    if found is None:
        raise CodexBinaryError(f"The codex binary {path!r} from {label} is not on PATH.",
                               INSTALL_HINT)
    return found


def resolve_codex_binary(
    setting: str | None = None, environ: Mapping[str, str] | None = None
) -> CodexBinary:
    """Find the codex executable, in the documented order. Raises :class:`CodexBinaryError`."""
    env = os.environ if environ is None else environ
    if setting is not None and not isinstance(setting, str):
        raise CodexBinaryError(
            f"The codex binary setting must be a path (a string), got "
            f"{type(setting).__name__}.",
            "Set it to the full path of the codex executable.",
        )
    bundled = _bundled()
    for source, value in (("setting", setting), ("CODEX_BIN", env.get("CODEX_BIN"))):
        if value and value.strip():
            path = _check_runnable(os.path.expanduser(value.strip()), source)
            # The bundled binary named explicitly still needs its helper directory (rg).
            same = bundled is not None and os.path.realpath(path) == os.path.realpath(bundled.path)
            return CodexBinary(path=path, source=source,
                               path_prepend=bundled.path_prepend if same and bundled else None)
    if bundled is not None:
        return bundled
    on_path = shutil.which("codex", path=env.get("PATH"))
    if on_path:
        return CodexBinary(path=on_path, source="PATH")
    raise CodexBinaryError("No codex binary was found (setting, $CODEX_BIN, bundled, PATH).",
                           INSTALL_HINT)


def probe_version(binary: CodexBinary, timeout: float = 15.0) -> tuple[int, int, int]:
    """Run ``codex --version`` and return the parsed version. Raises :class:`CodexBinaryError`.

    codex 0.171 sets up its home even for ``--version`` (it creates ``~/.codex`` with its state
    databases): the probe runs on a throwaway home, so asking the version never creates or
    touches the user's."""
    import tempfile

    try:
        with tempfile.TemporaryDirectory(prefix="codex-version-") as scratch:
            proc = subprocess.run(
                [binary.path, "--version"],
                env={**os.environ, "CODEX_HOME": scratch},
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
    except FileNotFoundError as exc:
        raise CodexBinaryError(f"{binary.path!r} could not be started ({exc}).",
                               INSTALL_HINT) from exc
    except PermissionError as exc:
        raise CodexBinaryError(f"{binary.path!r} is not executable ({exc}).",
                               INSTALL_HINT) from exc
    except OSError as exc:
        raise CodexBinaryError(f"{binary.path!r} is not a program this machine can run ({exc}).",
                               INSTALL_HINT) from exc
    except subprocess.TimeoutExpired as exc:
        raise CodexBinaryError(f"`{binary.path} --version` did not finish in {timeout:g}s.",
                               INSTALL_HINT) from exc
    version = parse_version(proc.stdout.strip()) if proc.returncode == 0 else None
    if version is None or "codex" not in proc.stdout.lower():
        raise CodexBinaryError(
            f"{binary.path!r} does not look like codex (`--version` printed "
            f"{(proc.stdout or proc.stderr).strip()[:120]!r}).",
            INSTALL_HINT,
        )
    require_supported(version, binary.path)
    return version


def require_supported(version: tuple[int, int, int], where: str = "codex") -> None:
    """Raise :class:`CodexBinaryError` when ``version`` is older than :data:`MIN_CODEX_VERSION`."""
    if version < MIN_CODEX_VERSION:
        raise CodexBinaryError(
            f"{where} is codex {format_version(version)}, older than the "
            f"{format_version(MIN_CODEX_VERSION)} this plugin needs (tested: "
            f"{', '.join(format_version(v) for v in TESTED_CODEX_VERSIONS)}).",
            INSTALL_HINT,
        )
