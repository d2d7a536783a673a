"""Test support shipped with the package: the mock Responses provider, an offline CODEX_HOME,
the schema validator, the schema-validating fake app-server, the wire recorder and the pytest
fixtures (:mod:`.pytest_plugin`, named in a ``conftest.py``). Nothing here is used by the
runtime itself."""
