"""``Parsed[T]``: a value parsed at the boundary, or the refusal its parse earned.

Services take typed values, parsed once where a request enters (a view, the admin). Some
refusals must still wait: the reference CLI checks some values only after the state they act
on (``task claim --lease-seconds 0`` on a leased task answers LEASE_CONFLICT; an update of a
missing task answers TASK_NOT_FOUND whatever its fields say). The boundary therefore parses
such a value into a ``Parsed``, which holds either the value or its refusal, and the service
asks for it with ``get()`` at the point where the reference judges it: that raises the
refusal there, so which error wins stays the reference's while no service parses anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

from agentchat.core.rules.errors import AppError

T = TypeVar("T")


class Parsed(Generic[T]):
    """Immutable, so one may be shared (``Parsed.ok`` of a constant)."""

    __slots__ = ("_refusal", "_value")

    _value: T | None
    _refusal: AppError | None

    def __init__(self, value: T | None, refusal: AppError | None) -> None:
        object.__setattr__(self, "_value", value)
        object.__setattr__(self, "_refusal", refusal)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Parsed is immutable: {name}")

    @classmethod
    def ok(cls, value: T) -> Parsed[T]:
        """A value that needs no parse (a constant, what a service passes itself)."""
        return cls(value, None)

    @classmethod
    def of(cls, parse: Callable[[Any], T], raw: Any) -> Parsed[T]:
        """``parse(raw)`` now; its AppError, if it raises one, kept for ``get()``. Any other
        exception is a bug and propagates at once."""
        try:
            return cls(parse(raw), None)
        except AppError as refusal:
            return cls(None, refusal)

    @property
    def refused(self) -> bool:
        return self._refusal is not None

    def get(self) -> T:
        """The value; raises the parse's AppError when it was refused."""
        if self._refusal is not None:
            raise self._refusal
        return cast(T, self._value)

    def __repr__(self) -> str:
        if self._refusal is not None:
            return f"Parsed(refused {self._refusal.code})"
        return f"Parsed({self._value!r})"
