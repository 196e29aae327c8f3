"""Small helpers shared by the public classes."""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["Final", "NoPublicConstructor"]


class Final(type):
    """Metaclass that forbids subclassing, as trio's ``trio._util.final`` does.

    Public handle and value classes are final: subclasses could break the invariants the
    owner task relies on, and a final class keeps the API small.
    """

    def __new__(
        mcs: type[Final], name: str, bases: tuple[type, ...], namespace: dict[str, Any]
    ) -> Final:
        for base in bases:
            if isinstance(base, Final):
                raise TypeError(
                    f"{base.__module__}.{base.__qualname__} does not support subclassing"
                )
        return super().__new__(mcs, name, bases, namespace)


class NoPublicConstructor(Final):
    """Metaclass for handles that only actormem builds (``Memory``, ``Snapshot``).

    ``Cls(...)`` raises :class:`TypeError`; the library calls ``Cls._create(...)``.
    """

    def __call__(cls, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} has no public constructor")

    def _create(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)
