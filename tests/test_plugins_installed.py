"""Third-party plugins as users install them: real distributions on ``sys.path`` whose entry
points (group ``codex_runtime``) ``make_plugin_manager`` discovers — their order against the
host, the ``CODEX_RUNTIME_LOAD_PLUGINS`` selection, a broken plugin reported once and skipped,
and a misspelt hook named in a warning instead of registering silently."""

from __future__ import annotations

import importlib
import logging
import sys
import textwrap

import pytest

from hermes_codex_runtime.hookspecs import hookimpl
from hermes_codex_runtime.plugins import make_plugin_manager
from hermes_codex_runtime.protocol import Decision
from hermes_codex_runtime.values import TurnContext

POLICY = textwrap.dedent('''
    from hermes_codex_runtime.hookspecs import hookimpl
    from hermes_codex_runtime.protocol import Decision

    @hookimpl(tryfirst=True)
    def codex_approval(agent, request):
        return Decision.DECLINE if "rm -rf" in str(request) else None
''')
ORDINARY = textwrap.dedent('''
    from hermes_codex_runtime.hookspecs import hookimpl
    from hermes_codex_runtime.protocol import Decision

    @hookimpl
    def codex_approval(agent, request):
        return Decision.DECLINE  # the host answers first: this never decides
''')
BROKEN = textwrap.dedent('''
    from hermes_codex_runtime.hookspecs import hookimpl
    from hermes_codex_runtime.protocol import Decision

    @hookimpl
    def codex_approval(agent, request, something_the_spec_lacks):
        return Decision.ACCEPT
''')
MISSPELT = textwrap.dedent('''
    from hermes_codex_runtime.hookspecs import hookimpl
    from hermes_codex_runtime.protocol import Decision

    @hookimpl(tryfirst=True)
    def codex_aproval(agent, request):  # the policy its author meant: never called
        return Decision.DECLINE

    @hookimpl
    def codex_event(agent, event):
        seen.append(event)

    seen = []
''')


class Host:
    @hookimpl
    def codex_approval(self, agent, request):
        return Decision.ACCEPT


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Three distributions installed into a directory on sys.path (as pip would lay them out)."""
    site = tmp_path / "site"
    for dist, module, source in (("org-policy", "hcr_org_policy", POLICY),
                                 ("usage-export", "hcr_usage_export", ORDINARY),
                                 ("broken-plugin", "hcr_broken_plugin", BROKEN),
                                 ("misspelt-policy", "hcr_misspelt_policy", MISSPELT)):
        (site / f"{module}.py").parent.mkdir(parents=True, exist_ok=True)
        (site / f"{module}.py").write_text(source)
        info = site / f"{module}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[codex_runtime]\n{dist} = {module}\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    # what was reported once per process: each test is a fresh process's first look
    from hermes_codex_runtime import plugins

    monkeypatch.setattr(plugins, "_reported", set())
    monkeypatch.setattr(plugins, "_unknown_reported", set())
    yield
    for module in ("hcr_org_policy", "hcr_usage_export", "hcr_broken_plugin",
                   "hcr_misspelt_policy"):
        sys.modules.pop(module, None)


def names(pm):
    return sorted(name for name, _ in pm.list_name_plugin() if name.startswith("entrypoint:"))


def test_installed_plugins_load_in_order_and_a_broken_one_is_skipped_once(installed,
                                                                          monkeypatch, caplog):
    monkeypatch.delenv("CODEX_RUNTIME_LOAD_PLUGINS", raising=False)
    with caplog.at_level(logging.WARNING, logger="hermes_codex_runtime.plugins"):
        pm = make_plugin_manager([Host()])
        make_plugin_manager([Host()])  # a second manager: no second warning
    assert names(pm) == ["entrypoint:misspelt-policy", "entrypoint:org-policy",
                         "entrypoint:usage-export"]
    warnings = [r.getMessage() for r in caplog.records if "broken-plugin" in r.getMessage()]
    assert len(warnings) == 1 and "skipped" in warnings[0]
    # the tryfirst policy overrides the host; the ordinary plugin never outranks the host
    context = TurnContext()
    assert pm.hook.codex_approval(agent=None, request="rm -rf /tmp/x",
                                  context=context) is Decision.DECLINE
    assert pm.hook.codex_approval(agent=None, request="ls", context=context) is Decision.ACCEPT


@pytest.mark.parametrize(("selection", "expected"), [
    ("org-policy", ["entrypoint:org-policy"]),
    ("misspelt-policy", ["entrypoint:misspelt-policy"]),
    ("org-policy, usage-export", ["entrypoint:org-policy", "entrypoint:usage-export"]),
    ("", []),
])
def test_codex_runtime_load_plugins_selects_which_load(installed, monkeypatch, selection,
                                                       expected):
    monkeypatch.setenv("CODEX_RUNTIME_LOAD_PLUGINS", selection)
    assert names(make_plugin_manager([Host()])) == expected


def test_a_misspelt_hook_is_a_warning_naming_the_plugin_and_its_other_hooks_still_run(
        installed, monkeypatch, caplog):
    monkeypatch.setenv("CODEX_RUNTIME_LOAD_PLUGINS", "misspelt-policy")
    with caplog.at_level(logging.WARNING, logger="hermes_codex_runtime.plugins"):
        pm = make_plugin_manager([Host()])
        make_plugin_manager([Host()])  # a second manager: no second warning
    [warning] = [r.getMessage() for r in caplog.records if "misspelt-policy" in r.getMessage()]
    assert "'codex_aproval'" in warning and "never called" in warning
    assert "did you mean 'codex_approval'" in warning
    context = TurnContext()
    # the host's decision stands (the misspelt policy never ran) ...
    assert pm.hook.codex_approval(agent=None, request="rm -rf /", context=context) \
        is Decision.ACCEPT
    # ... and the plugin's correctly named hook is called
    pm.hook.codex_event(agent=None, event="progress", context=context)
    assert importlib.import_module("hcr_misspelt_policy").seen == ["progress"]
