"""``/fast`` and ``/rollback`` on codex turns, through Hermes' own CLI (``HermesCLI`` in this
process, on config.yaml as a ``hermes`` process reads it) with the real codex binary on the mock
provider: the service tier ``/fast`` chooses reaches the model's requests, and ``/rollback``
restores what a codex turn changed in the workspace."""

from __future__ import annotations

import contextlib
import importlib.util
import io

import pytest
from hermes_env import write_config

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.offline.codex_home import prepare_codex_home

pytestmark = pytest.mark.real_hermes

#: An OpenAI model Hermes offers ``/fast`` for (Priority Processing).
FAST_MODEL = "gpt-5.5"


@pytest.fixture
def cli(hermes, monkeypatch):
    """Factory: ``cli(model)`` → Hermes' interactive CLI on the test's Hermes home, with
    ``model.default: model`` and ``checkpoints.enabled`` in config.yaml, working in the test's
    directory."""
    import cli as hermes_cli

    monkeypatch.setenv("TERMINAL_CWD", str(hermes.workdir))
    monkeypatch.chdir(hermes.workdir)
    apps = []

    def make(model: str = "mock-model"):
        config = hermes.configure(default=model)
        config["checkpoints"] = {"enabled": True}
        write_config(hermes.home, config)
        # what a new `hermes` process reads at start-up
        monkeypatch.setattr(hermes_cli, "CLI_CONFIG", hermes_cli.load_cli_config())
        app = hermes_cli.HermesCLI()
        apps.append(app)
        return app

    yield make
    for app in apps:
        if app.agent is not None:
            app.agent.close()


def say(app, text: str) -> str:
    """One turn through the CLI's own chat path; what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        app.chat(text)
    return out.getvalue()


def command(app, text: str) -> str:
    """One slash command through the CLI's dispatcher; what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        app.process_command(text)
    return out.getvalue()


def tiers(hermes) -> list[str | None]:
    """The service tier of each request the model received."""
    return [request.get("service_tier") for request in hermes.provider.requests]


def offer_fast_model(hermes) -> None:
    """Put :data:`FAST_MODEL` in the offline codex's model catalog, with its fast tier: codex
    sends a tier only for a model whose catalog entry lists it."""
    prepare_codex_home(hermes.codex_home, hermes.provider.base_url,
                       codex_bin=hermes.codex_binary.path, extra_models=(FAST_MODEL,))


def test_fast_reaches_codex_requests_and_fast_off_clears_it(cli, hermes):
    offer_fast_model(hermes)
    app = cli(FAST_MODEL)
    hermes.provider.enqueue(mp.text("normal one"), mp.text("fast one"), mp.text("normal two"))
    say(app, "first, at the normal tier")
    command(app, "/fast on")
    say(app, "second, fast")
    command(app, "/fast off")
    say(app, "third, normal again")
    assert tiers(hermes) == [None, "priority", None]


def test_fast_cold_makes_only_the_first_turn_fast(cli, hermes):
    """The 0.22 line's ``/fast cold`` opens a fast window on a session's first turn only, the
    agent unchanged: the next codex turn on the same thread is back at the normal tier. A host
    without fast windows (0.19.0) refuses the word: no turn is fast."""
    offer_fast_model(hermes)
    app = cli(FAST_MODEL)
    hermes.provider.enqueue(mp.text("cold start"), mp.text("warmed up"))
    command(app, "/fast cold")
    say(app, "first turn of the session")
    say(app, "second turn")
    windows = importlib.util.find_spec("agent.fast_mode") is not None
    assert tiers(hermes) == (["priority", None] if windows else [None, None])


def update(path: str, old: str, new: str):
    """A codex ``apply_patch`` turning the line ``old`` of ``path`` into ``new``."""
    return mp.apply_patch(f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n"
                          "*** End Patch\n")


def test_rollback_restores_what_each_codex_turn_changed(cli, hermes):
    """Each codex turn is checkpointed before it runs: ``/rollback 1`` undoes the last turn's
    patch and command, the checkpoint before the first turn brings the workspace back as the
    user left it."""
    notes, data = hermes.workdir / "notes.txt", hermes.workdir / "data.txt"
    notes.write_text("kept by the user\n")
    data.write_text("1,2,3\n")
    app = cli()
    hermes.provider.enqueue(update("notes.txt", "kept by the user", "first edit"),
                            mp.text("edited"),
                            update("notes.txt", "first edit", "second edit"),
                            mp.exec_command("echo overwritten > data.txt", escalated=True),
                            mp.text("edited again"))
    say(app, "edit the notes")
    say(app, "edit them again and overwrite the data")
    assert (notes.read_text(), data.read_text()) == ("second edit\n", "overwritten\n")
    listed = command(app, "/rollback")
    assert listed.count("before codex turn") == 2, listed

    restored = command(app, "/rollback 1")
    assert (notes.read_text(), data.read_text()) == ("first edit\n", "1,2,3\n"), restored
    manager = app.agent._checkpoint_mgr
    listing = manager.list_checkpoints(str(hermes.workdir))  # newest first, as /rollback numbers
    first = max(i for i, c in enumerate(listing) if c["reason"] == "before codex turn")
    # by its number: a short hash of digits alone would be read as a number
    restored = command(app, f"/rollback {first + 1}")
    assert (notes.read_text(), data.read_text()) == ("kept by the user\n", "1,2,3\n"), restored
