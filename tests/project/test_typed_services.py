"""Services take typed values, parsed once at the boundary (STYLE.md, "The shape of an app"): a
parameter typed ``object`` or ``Any`` is a boundary that leaked inward. Parsers and checks
(``*_parse``, ``*_check``) are the boundary and take anything."""

from __future__ import annotations

import inspect
import types
import typing
from types import ModuleType

import pytest

from channels_app.services import events as event_services
from locks_app import selectors as lock_selectors
from locks_app import services as lock_services

TYPED = [event_services, lock_services, lock_selectors]


def _public_functions(module: ModuleType) -> list[tuple[str, typing.Any]]:
    return [
        (name, value)
        for name, value in vars(module).items()
        if inspect.isfunction(value)
        and value.__module__ == module.__name__
        and not name.startswith("_")
        and not name.endswith(("_parse", "_check"))
    ]


def _untyped(hint: typing.Any) -> bool:
    """``Any`` or ``object``, alone or in a union (a container's items, such as a JSON
    payload's ``dict[str, Any]`` that the server builds, are not what a caller parses)."""
    if hint is typing.Any or hint is object:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_untyped(arg) for arg in typing.get_args(hint))
    return False


@pytest.mark.parametrize("module", TYPED, ids=lambda module: module.__name__)
def test_public_services_take_no_untyped_parameters(module):
    leaks = []
    for name, function in _public_functions(module):
        hints = typing.get_type_hints(inspect.unwrap(function))
        leaks += [
            f"{name}({parameter})"
            for parameter in inspect.signature(inspect.unwrap(function)).parameters
            if _untyped(hints.get(parameter, typing.Any))
        ]
    assert not leaks, leaks
