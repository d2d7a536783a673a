"""The package as Hermes and pip see it: manifest, entry points, layering."""

from __future__ import annotations

import ast
import tomllib
from importlib import metadata
from pathlib import Path

import yaml

import hermes_codex_runtime

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hermes_codex_runtime"
HERMES_TOP_LEVEL = {"agent", "run_agent", "hermes_cli", "tools", "gateway", "cron",
                    "hermes_state", "hermes_constants", "model_tools", "cli"}


def test_plugin_manifest_copies_are_identical_and_versioned_like_the_package():
    top = (ROOT / "plugin.yaml").read_text()
    inner = (PACKAGE / "plugin.yaml").read_text()
    assert top == inner
    manifest = yaml.safe_load(top)
    assert manifest["name"] == "codex-runtime"
    assert manifest["kind"] == "standalone"
    assert manifest["requires_hermes"] == ">=0.19.0"
    assert "manifest_version" not in manifest  # v1: some installers reject v2
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert manifest["version"] == hermes_codex_runtime.__version__ == project["version"]
    assert metadata.version("hermes-codex-runtime") == project["version"]


def test_hermes_entry_point_is_a_module_with_register():
    eps = metadata.entry_points(group="hermes_agent.plugins")
    ours = [ep for ep in eps if ep.name == "codex-runtime"]
    assert len(ours) == 1
    # Hermes does getattr(ep.load(), "register"): the adapter, the only package that knows Hermes
    assert ours[0].value == "hermes_codex_runtime.hermes"
    assert callable(ours[0].load().register)


def test_console_script_is_installed():
    scripts = metadata.entry_points(group="console_scripts")
    assert any(ep.name == "hermes-codex-runtime" for ep in scripts)


def test_plugin_module_avoids_strings_that_reroute_upstream_loader():
    # Upstream classifies an entry-point module by scanning its first 8 KiB: these strings make
    # it treat the plugin as a provider/memory plugin and never call register().
    head = (PACKAGE / "hermes" / "__init__.py").read_text()[:8192]
    assert "MemoryProvider" not in head
    assert not ("register_provider" in head and "ProviderProfile" in head)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_only_the_hermes_adapter_imports_hermes():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "hermes" in path.relative_to(PACKAGE).parts[:1]:
            continue
        for name in _imports(path):
            if name.split(".")[0] in HERMES_TOP_LEVEL:
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []


def test_each_layer_imports_only_the_ones_below_it():
    upper = ("hermes_codex_runtime.session", "hermes_codex_runtime.runtime",
             "hermes_codex_runtime.hermes", "hermes_codex_runtime.testing",
             "hermes_codex_runtime.cli", "hermes_codex_runtime.values",
             "hermes_codex_runtime.projector", "hermes_codex_runtime.replay")
    offenders = []
    for path in (PACKAGE / "pool").rglob("*.py"):  # between the wire and the session
        for name in _imports(path):
            if name.startswith(upper):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    upper = (*upper, "hermes_codex_runtime.pool")
    for layer in ("wire", "protocol"):
        for path in (PACKAGE / layer).rglob("*.py"):
            for name in _imports(path):
                if name.startswith(upper):
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    for path in (PACKAGE / "replay").rglob("*.py"):  # over the session; hosts pass values in
        for name in _imports(path):
            if name.startswith(("hermes_codex_runtime.hermes", "hermes_codex_runtime.runtime",
                                "hermes_codex_runtime.cli", "hermes_codex_runtime.testing")):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    for path in (PACKAGE / "protocol").rglob("*.py"):
        for name in _imports(path):
            if name.startswith("hermes_codex_runtime.wire") or name.split(".")[0] in (
                    "subprocess", "socket", "threading"):
                offenders.append(f"{path.relative_to(ROOT)} (pure layer) imports {name}")
    assert offenders == []


class _RuntimeRegistryHost:
    """A host context that offers the proposed upstream runtime registry."""

    def __init__(self, fail=False):
        self.fail = fail
        self.registered = []

    def register_agent_runtime(self, *, descriptor, factory):
        if self.fail:
            raise TypeError("unexpected signature")
        self.registered.append((descriptor, factory()))


def test_a_host_runtime_registry_is_used_when_offered():
    from hermes_codex_runtime.hermes.installing import seams

    host = _RuntimeRegistryHost()
    assert seams._install_turn(host) is True
    [(descriptor, turn_function)] = host.registered
    assert descriptor["api_mode"] == "codex_app_server"
    assert turn_function is seams.codex_turn


def test_the_host_contract_document_lists_every_hook_as_hookspecs_declares_it():
    """docs/host-contract.md's hook table against the live hookspecs: the same hooks, each
    with its arguments in order and its firstresult flag."""
    import re

    from hermes_codex_runtime.plugins import make_plugin_manager

    table = (ROOT / "docs" / "host-contract.md").read_text()
    documented = {
        name: (tuple(a.strip() for a in args.split(",") if a.strip()), first == "yes")
        for name, args, first in re.findall(
            r"^\| `(codex_\w+)\(([^)]*)\)` \| (yes|no) \|", table, flags=re.MULTILINE)}
    pm = make_plugin_manager(load_entry_points=False)
    declared = {name: (tuple(caller.spec.argnames), bool(caller.spec.opts.get("firstresult")))
                for name, caller in vars(pm.hook).items() if caller.spec is not None}
    assert documented == declared


def test_the_host_contract_document_lists_every_event_kind_with_its_class_and_fields():
    """docs/host-contract.md's Events table against ``events.CodexEvent``: each kind once, with
    the class that carries it and every field of that class beyond ``kind`` and ``text``; and
    ``EventKind`` names exactly the kinds of the union."""
    import dataclasses
    import re
    import typing

    from hermes_codex_runtime import events

    table = (ROOT / "docs" / "host-contract.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \|[^|]*\|([^|]*)\|$", table,
                      flags=re.MULTILINE)
    documented = {kind: (name, carries) for kind, name, carries in rows}
    classes = {next(f.default for f in dataclasses.fields(cls) if f.name == "kind"): cls
               for cls in typing.get_args(events.CodexEvent)}
    assert set(documented) == set(classes) == set(typing.get_args(events.EventKind))
    assert len(rows) == len(classes)
    for kind, cls in classes.items():
        name, carries = documented[kind]
        assert name == cls.__name__, kind
        fields = [f.name for f in dataclasses.fields(cls) if f.name not in ("kind", "text")]
        assert all(f"`{field}`" in carries for field in fields), (kind, fields, carries)
