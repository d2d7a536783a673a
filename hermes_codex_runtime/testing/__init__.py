"""Test support shipped with the package: the schema validator, the schema-validating fake
app-server (with its scripted steps and harness), the wire recorder, a stdio MCP server, a real
remote app-server, headless Chromium, and the pytest fixtures (:mod:`.pytest_plugin`, named in
a ``conftest.py``). It builds on the offline pieces of :mod:`hermes_codex_runtime.offline`;
no module outside ``testing/`` and the tests imports it (``tests/test_import_graph.py``)."""
