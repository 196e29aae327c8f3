"""Everything public is exported and final (trio's test_exports habit)."""

from __future__ import annotations

import enum
import inspect
from typing import Protocol

import pytest

import actormem


def test_all_names_resolve() -> None:
    for name in actormem.__all__:
        assert hasattr(actormem, name), name
    assert len(set(actormem.__all__)) == len(actormem.__all__)


def _public_classes() -> list[type]:
    out = []
    for name in actormem.__all__:
        obj = getattr(actormem, name)
        if not inspect.isclass(obj) or issubclass(obj, (enum.Enum, BaseException)):
            continue  # enums cannot be extended; exceptions stay open for catching hierarchies
        if Protocol in getattr(obj, "__mro__", ()) or getattr(obj, "_is_protocol", False):
            continue  # protocols are meant to be implemented
        out.append(obj)
    return out


@pytest.mark.parametrize("cls", _public_classes(), ids=lambda c: c.__name__)
def test_public_classes_are_final(cls: type) -> None:
    with pytest.raises(TypeError):
        type("Sub", (cls,), {})


def test_exported_objects_have_docstrings() -> None:
    for name in actormem.__all__:
        obj = getattr(actormem, name)
        if callable(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"
