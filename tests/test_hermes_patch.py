"""The one way the adapter patches Hermes (``symbols.patch``): wrapping twice never wraps a
wrapper, the host's own function stays reachable, and a missing symbol changes nothing."""

from __future__ import annotations

import sys
import types

import pytest

from hermes_codex_runtime.hermes.symbols.patch import is_ours, original_of, wrap_in_place


@pytest.fixture
def host_module():
    module = types.ModuleType("fake_host_module_for_patch")

    def greet(name: str) -> str:
        """The host's own greeting."""
        return f"hello {name}"

    module.greet = greet
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def _loud(original):
    def greet(name: str) -> str:
        return original(name).upper()

    return greet


def test_a_module_function_is_wrapped_once_however_often_it_is_installed(host_module):
    host_greet = host_module.greet
    assert wrap_in_place(host_module.__name__, "greet", _loud, feature="greetings") is True
    first = host_module.greet
    assert wrap_in_place(host_module.__name__, "greet", _loud, feature="greetings") is True
    assert host_module.greet is first
    assert host_module.greet("ann") == "HELLO ANN"  # once upper-cased, never wrapped twice
    assert is_ours(first) and not is_ours(host_greet)
    assert original_of(first) is host_greet
    assert first.__doc__ == "The host's own greeting."


def test_a_class_method_is_wrapped_where_the_class_looks_it_up():
    class Agent:
        def steer(self, text: str) -> str:
            return text

    def make(original):
        def steer(self, text: str) -> str:
            return original(self, text) + "!"

        return steer

    assert wrap_in_place(Agent, "steer", make, feature="steer") is True
    assert Agent().steer("left") == "left!"


def test_a_missing_symbol_leaves_the_host_as_it_is_and_is_reported(host_module, caplog):
    assert wrap_in_place(host_module.__name__, "farewell", _loud, feature="farewells") is False
    assert not hasattr(host_module, "farewell")
    assert wrap_in_place("no_such_host_module_anywhere", "greet", _loud,
                         feature="greetings") is False
    assert "farewells" in caplog.text
