"""The wheel's build step (setuptools ``build_py``, named in ``pyproject.toml``): it also puts
``hermes/hermes_codex_runtime.pth`` at the top of the wheel, where pip installs it into
site-packages — Python then runs its one line at start-up (see
:mod:`.hermes.installing.early`). Nothing imports this module at run time."""

from __future__ import annotations

from pathlib import Path

from setuptools.command.build_py import build_py

PTH = Path(__file__).parent / "hermes" / "hermes_codex_runtime.pth"


class BuildPy(build_py):  # type: ignore[misc]  # setuptools ships no types here
    """``build_py``, plus the start-up hook at the wheel's root."""

    def run(self) -> None:
        super().run()
        self.copy_file(str(PTH), str(Path(self.build_lib) / PTH.name), preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib) / PTH.name)]
