"""Test support shipped with the package: the mock Responses provider, an offline CODEX_HOME,
the schema validator, the schema-validating fake app-server, the wire recorder and the pytest
fixtures (entry point ``pytest11``). Nothing here is used by the runtime itself."""
