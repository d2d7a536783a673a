"""The walls' decisions without a binary: which thread/start fields a thread gets, which host
paths codex can take, the probe's verdict kept per binary, token files others can read, and the
redaction of every password spelling a command line can carry (property tests)."""

from __future__ import annotations

import os
import shutil
import string

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hermes_codex_runtime.protocol.permissions import (
    FALLBACK,
    NONE,
    OFF,
    OWN_PROFILE,
    PROFILE,
    UP,
    Walls,
    thread_permissions,
)
from hermes_codex_runtime.wire.redact import redact
from hermes_codex_runtime.wire.verdicts import Verdict, VerdictCache
from hermes_codex_runtime.wire.walls import outgrown, shape

WALLS = Walls(deny_read=("/h/.env",), protect=("/h",))


def decide(sandbox=None, *, walls=WALLS, user_mode=None, user_profile=None, held=True,
           approval="on-request"):
    return thread_permissions(sandbox=sandbox, walls=walls, user_mode=user_mode,
                              user_profile=user_profile, held=held, approval_policy=approval)


def test_a_thread_with_walls_gets_the_profile_and_never_the_sandbox_field_too():
    for mode in ("read-only", "workspace-write"):
        got = decide(mode)
        assert got.status == UP and got.sandbox is None and got.approval_policy is None
        profile = got.config["permissions"][PROFILE]
        assert got.config["default_permissions"] == PROFILE
        assert profile["filesystem"] == {"/h": "read", "/h/.env": "none"}
    # the host names no mode: the user's codex config decides, then codex's default (read-only)
    assert decide(user_mode="workspace-write").mode == "workspace-write"
    assert decide().mode == "read-only"


def test_the_users_choices_win():
    assert decide("danger-full-access").status == OFF
    assert decide(user_mode="danger-full-access").sandbox == "danger-full-access"
    own = decide(user_profile="mine")  # their own default_permissions, no mode from the host
    assert own.status == OWN_PROFILE and own.sandbox is None and own.config == {}
    assert decide("workspace-write", user_profile="mine").status == UP  # the host's mode
    carried = decide("workspace-write", walls=Walls(protect=("/h",), writable_roots=("/x",),
                                                     network=True))
    profile = carried.config["permissions"][PROFILE]
    assert profile["filesystem"]["/x"] == "write" and profile["network"] == {"enabled": True}


@pytest.mark.parametrize("held", [False, None])
def test_walls_that_did_not_hold_give_the_read_only_fallback_with_commands_asked(held):
    got = decide("workspace-write", held=held)
    assert got.status == FALLBACK and got.sandbox == "read-only" and got.config == {}
    assert got.approval_policy == "untrusted"
    assert decide("workspace-write", held=held, approval="never").approval_policy is None


def test_no_walls_keep_the_plain_sandbox():
    got = decide("workspace-write", walls=Walls())
    assert got.status == NONE and got.sandbox == "workspace-write" and got.config == {}


def test_walls_go_only_to_app_servers_on_this_machine(tmp_path):
    from hermes_codex_runtime.values import SessionSettings
    from hermes_codex_runtime.walls import on_this_machine, thread_walls

    settings = SessionSettings(sandbox="workspace-write", deny_read=(str(tmp_path),))
    remote = thread_walls(settings, endpoint="wss://build.example.invalid/codex")
    assert remote.status == NONE and remote.sandbox == "workspace-write" and remote.config == {}
    assert all(on_this_machine(url) for url in (None, "ws://127.0.0.1:4500", "ws://localhost:1",
                                                "unix:///run/codex.sock", "ws://[::1]:9"))


def test_a_profile_is_shaped_to_what_codex_can_enforce(tmp_path):
    """codex fails every command for a walled path that crosses a link in a writable place,
    fails the thread's start for a link to a file elsewhere, and leaves placeholders behind for
    missing paths in a writable place (docs/codex-facts.md): links are sent as their targets,
    missing names there are left out (and named), and what is already read-only costs
    nothing."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    (home / ".hermes").mkdir(parents=True)
    (home / "vault").mkdir()
    (home / "vault" / "hermes.env").write_text("x")
    (home / ".hermes" / ".env").symlink_to(home / "vault" / "hermes.env")
    (home / "notes").mkdir()
    (home / "notes" / "plain.txt").write_text("p")
    (home / ".zshrc").symlink_to("notes/plain.txt")  # planted by a command
    (home / "keys").mkdir()
    for name in ("id_ed25519", "a.pem", "b.pem"):
        (home / "keys" / name).write_text("k")
    outside.mkdir()
    (outside / "ro.txt").write_text("r")
    shaped = shape(Walls(
        deny_read=(str(home / ".hermes" / ".env"), str(home / "keys" / "*.pem"),
                   str(home / "nowhere" / "*.key"), str(home / "missing.token"),
                   str(outside / "later.db-wal"), "keys/id_ed25519"),
        protect=(str(home / ".hermes"), str(home / ".zshrc"), str(home / ".bash_profile"),
                 str(home / ".hermes" / "plugins"), str(outside / "ro.txt"))),
        cwd=str(home), writable=(str(home),))
    assert shaped.walls.deny_read == (
        str(home / "vault" / "hermes.env"),  # the target: the link sits in a read-only place
        str(home / "keys" / "a.pem"), str(home / "keys" / "b.pem"),  # the glob, expanded now
        str(home / "keys" / "id_ed25519"))  # nothing missing: walled once made, next thread
    assert shaped.walls.protect == (str(home / ".hermes"), str(home / "notes" / "plain.txt"))
    # the planted link can be pointed elsewhere by a command; the secret's link cannot
    assert [(e.link, e.target) for e in shaped.exposed] == [
        (str(home / ".zshrc"), str(home / "notes" / "plain.txt"))]
    assert shaped.creatable == (str(home / ".bash_profile"),)
    # read-only mode: nothing is writable, so only what must stay unreadable is sent
    read_only = shape(Walls(deny_read=(str(home / "keys" / "a.pem"),),
                            protect=(str(home / ".hermes"), str(home / ".zshrc"))),
                      cwd=str(home), writable=())
    assert read_only.walls.protect == () and read_only.exposed == ()
    assert read_only.walls.deny_read == (str(home / "keys" / "a.pem"),)
    # what appears later: the session renews the walls before the next turn (what vanishes
    # stays in the profile: codex walls it again once it is back)
    assert outgrown(shaped.watched) is None
    (home / "notes" / "c.pem").write_text("not walled: another directory")
    (outside / "later.txt").write_text("not a walled name")
    assert outgrown(shaped.watched) is None
    (outside / "later.db-wal").write_text("w")
    assert outgrown(shaped.watched) == f"{outside / 'later.db-wal'} appeared"
    (outside / "later.db-wal").unlink()
    (home / "keys" / "b.pem").unlink()
    assert outgrown(shaped.watched) is None
    (home / "keys" / "b.pem").write_text("k")
    assert outgrown(shaped.watched) is None
    (home / ".bash_profile").write_text("# made by a command: read-only from the next turn")
    assert outgrown(shaped.watched) == f"{home / '.bash_profile'} appeared"
    (home / ".bash_profile").unlink()
    (outside / "ro.txt").unlink()  # already read-only (outside every writable place): no wall
    assert outgrown(shaped.watched) is None


def test_a_verdict_is_kept_by_the_binarys_content_so_a_copy_elsewhere_is_not_probed_again(
        tmp_path, monkeypatch):
    """The verdicts live in one file per user, keyed by what the binary is: the same binary in
    another place (a new home's venv, a container's image) takes the kept verdict without a
    probe; a changed binary is probed again; an unknown verdict is never kept."""
    from hermes_codex_runtime import walls
    from hermes_codex_runtime.wire import verdicts

    probed = []

    def probe(binary, *, timeout):
        probed.append(binary)
        return Verdict(True, "held", binary)

    monkeypatch.setattr(walls, "probe", probe)
    binary = tmp_path / "venv" / "codex"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n# release 1\n")
    binary.chmod(0o755)
    path = tmp_path / "cache" / "walls.json"
    VerdictCache(path).put(Verdict(None, "could not tell", str(binary)))
    assert VerdictCache(path).get(str(binary)) is None and not path.exists()
    assert walls.verify(str(binary), path).held is True and probed == [str(binary)]
    assert VerdictCache(path).get(str(binary)).held is True
    # a new process: nothing in memory; the file remembers the binary's digest, no re-hashing
    monkeypatch.setattr(verdicts, "_digests", {})
    monkeypatch.setattr(walls, "_memo", {})
    hashed = []
    real_hash = verdicts._hash
    monkeypatch.setattr(verdicts, "_hash", lambda path: hashed.append(path) or real_hash(path))
    assert walls.verify(str(binary), path).held is True and probed == [str(binary)]
    assert hashed == []

    copy = tmp_path / "container" / "codex"
    copy.parent.mkdir()
    shutil.copy(binary, copy)  # another path, inode and mtime; the same content
    assert walls.verify(str(copy), path).held is True and probed == [str(binary)]

    binary.write_text("#!/bin/sh\n# release 2, patched\n")
    assert VerdictCache(path).get(str(binary)) is None
    assert walls.verify(str(binary), path).held is True and probed == [str(binary)] * 2
    assert VerdictCache(path).get(str(copy)).held is True  # the first release's verdict stays


#: What a codex binary that cannot prove the walls does when asked for its model catalog.
BROKEN_BINARIES = {
    "prints something that is not JSON": 'echo "codex wrapper 1.0: ready"',
    "prints nothing": "exit 0",
    "crashes": 'echo "segmentation fault" >&2; exit 139',
    "hangs": "exec sleep 30",
}


@pytest.mark.parametrize("behaviour", sorted(BROKEN_BINARIES))
def test_a_probe_that_cannot_run_gives_the_fallback_with_its_reason_and_never_raises(
        tmp_path, behaviour):
    """``walls.probe`` on a binary that answers ``codex debug models --bundled`` with non-JSON,
    nothing, a crash or a hang: an unknown verdict (the read-only fallback), saying what the
    binary did — within the probe's time, not codex's own minute."""
    import time

    from hermes_codex_runtime.walls import fallback_notice, probe

    binary = tmp_path / behaviour.replace(" ", "-") / "codex"
    binary.parent.mkdir()
    binary.write_text(f"#!/bin/sh\n{BROKEN_BINARIES[behaviour]}\n")
    binary.chmod(0o755)
    started = time.monotonic()
    verdict = probe(str(binary), timeout=3.0)
    assert time.monotonic() - started < 20
    assert verdict.held is None, verdict
    assert verdict.detail.startswith("the probe could not run: `codex debug models --bundled`")
    expected = {"prints something that is not JSON": "'codex wrapper 1.0: ready'",
                "prints nothing": "'nothing'", "crashes": "failed (139)",
                "hangs": "did not answer within 3s"}[behaviour]
    assert expected in verdict.detail
    assert "commands run read-only" in fallback_notice(verdict)


def test_a_token_file_others_can_read_is_named_with_the_fix(tmp_path, caplog):
    from hermes_codex_runtime.pool import EndpointSpec
    from hermes_codex_runtime.pool.remote import exposed_token_file, read_token

    token = tmp_path / "ws-token"
    token.write_text("secret-token-value")
    token.chmod(0o644)
    problem = exposed_token_file(str(token))
    assert problem is not None and "0644" in problem and f"chmod 600 {token}" in problem
    spec = EndpointSpec(url="ws://127.0.0.1:9", token_file=str(token))
    with caplog.at_level("WARNING", logger="hermes_codex_runtime.pool.remote"):
        assert read_token(spec) == read_token(spec) == "secret-token-value"  # still used
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "0644" in warnings[0]  # once per file
    assert "secret-token-value" not in warnings[0]
    token.chmod(0o600)
    assert exposed_token_file(str(token)) is None


def test_arguments_shown_to_the_host_mask_values_of_secret_named_keys(hermes_base):
    from hermes_codex_runtime.hermes.turn.events import shown_arguments

    shown = shown_arguments({"query": "weather", "api_key": "plainvalue1",
                             "nested": [{"password": "plainvalue2"}],
                             "command": "mysql -uroot -pplainvalue3 db"})
    text = repr(shown)
    assert "plainvalue" not in text and "weather" in text and "mysql -uroot -p" in text


# ------------------------------------------------------------------------ redaction


SECRET = st.text(string.ascii_letters + string.digits + "!#%^*_+.~", min_size=6, max_size=40)
USER = st.text(string.ascii_lowercase, min_size=1, max_size=12)
#: Command lines (and header/URL texts) with ``{pw}`` where a secret goes; each must lose it.
SPELLINGS = (
    "mysql -uroot -p{pw} -e 'select 1'",
    "mysqldump --host db -u admin -p'{pw}' shop",
    "mariadb -h 127.0.0.1 -p{pw}",
    "psql --password {pw} -h db",
    "deploy --password={pw} --verbose",
    "tool --api-key {pw}",
    "openssl enc -aes256 -pass pass:{pw} -in x",
    "curl -u {user}:{pw} https://api.example.invalid/",
    "curl --user {user}:{pw} https://api.example.invalid/",
    "sshpass -p {pw} ssh backup@host",
    "sshpass -p{pw} scp a b:",
    "git clone https://{user}:{pw}@git.example.invalid/repo.git",
    "postgres://{user}:{pw}@db.internal:5432/app",
    "curl -H 'Authorization: Bearer {pw}' https://x.invalid",
    'curl -H "Authorization: {pw}" https://x.invalid',
    "Authorization: Basic {pw}",
    '{{"authorization": "Bearer {pw}"}}',
    "DB_PASSWORD={pw} ./run",
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(spelling=st.sampled_from(SPELLINGS), pw=SECRET, user=USER)
def test_every_password_spelling_is_redacted(spelling, pw, user):
    text = spelling.format(pw=pw, user=user)
    assume(pw not in spelling.format(pw="", user=user))  # the secret is not also context
    shown = redact(text)
    assert pw not in shown
    assert redact(shown) == shown  # redacting twice changes nothing more
    # the words before the secret stay readable
    assert text.split(pw)[0].rsplit(" ", 1)[0] in shown


@given(words=st.lists(st.sampled_from(["mkdir -p build", "ssh -p 2222 host", "cp -pr a b",
                                       "sort -u names.txt", "docker login --password-stdin",
                                       "ssh://git@github.com/o/r.git", "ls -la ~/.ssh",
                                       "the authorization server is down"]),
                      min_size=1, max_size=4))
def test_ordinary_command_lines_are_left_alone(words):
    text = "; ".join(words)
    assert redact(text) == text


def test_tool_previews_and_results_reach_the_host_redacted_even_where_the_cut_splits_a_key(
        hermes_base):
    """The preview is cut at 120 characters after redaction: a key the cut would split (so no
    pattern matches its stump) never shows, nor does a password in the arguments or the
    result the tool cards get."""
    from types import SimpleNamespace

    from hermes_codex_runtime.events import ToolCompleted, ToolStarted
    from hermes_codex_runtime.hermes.turn.events import bridge
    from hermes_codex_runtime.projector import ToolCall

    key = "sk-proj-" + os.urandom(20).hex()
    command = "x" * 100 + f" OPENAI_API_KEY={key} mysql -uroot -phunter2pw"
    seen = []
    agent = SimpleNamespace(
        tool_progress_callback=lambda *args, **kwargs: seen.append((args, kwargs)),
        tool_start_callback=lambda *args: seen.append(args),
        tool_complete_callback=lambda *args: seen.append(args))
    tool = ToolCall("codex_1", "exec_command", {"command": command}, "1")
    bridge(agent, ToolStarted(tool.name, tool, {}), None)
    item = {"type": "commandExecution", "id": "1", "command": command, "exitCode": 0,
            "aggregatedOutput": f"using {key}\nDB_PASSWORD=hunter2pw\n"}
    bridge(agent, ToolCompleted(tool.name, tool, item), None)
    text = repr(seen)
    assert key[:14] not in text and "hunter2pw" not in text
    assert "x" * 100 in text and "mysql -uroot -p" in text  # the rest is shown


def test_workspace_instructions_stay_out_only_where_sessions_share_a_writable_workspace(
        tmp_path, monkeypatch):
    from hermes_codex_runtime.hermes.turn.instructions import left_out

    home, project = tmp_path / "home", tmp_path / "home" / "project"
    project.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))

    def out(platform, cwd, mode="workspace-write", setting="auto"):
        return left_out(platform=platform, cwd=str(cwd), mode=mode, setting=setting)

    assert not out("cli", project) and not out(None, project)  # one person's own project
    assert out("cli", home)  # the home directory: every later session runs there too
    assert out("telegram", project) and out("api_server", project) and out("cron", project)
    assert out("discord", project, mode="danger-full-access")
    assert not out("telegram", project, mode="read-only")  # no command can write it
    assert not out("telegram", home, setting="load")  # the operator's choice
