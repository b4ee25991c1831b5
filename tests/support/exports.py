"""Pinning what a public package exports, in httpx's style: ``__all__`` is exactly the expected names."""

from __future__ import annotations

import importlib
from types import ModuleType


def assert_exports(package_name: str, expected: set[str]) -> None:
    """``__all__`` lists exactly ``expected``, sorted, each importable; nothing else public sits in the package.

    Submodules are left out of the last check: importing ``warren.broker.wire`` puts ``wire`` on the package.
    """
    package = importlib.import_module(package_name)
    exported = list(package.__all__)
    assert set(exported) == expected, f"added: {set(exported) - expected}, missing: {expected - set(exported)}"
    assert exported == sorted(expected), "__all__ is kept sorted, each name once"
    for name in exported:
        namespace: dict[str, object] = {}
        exec(f"from {package_name} import {name}", namespace)  # as a user writes it
        assert namespace[name] is getattr(package, name)
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and name != "annotations" and not isinstance(value, ModuleType)
    }
    assert public <= set(exported), f"public but not in __all__: {sorted(public - set(exported))}"
