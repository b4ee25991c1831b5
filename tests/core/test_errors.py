"""One error root: every exception class Warren defines is a WarrenError and is drawn in the tree."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import warren
from warren.core import errors
from warren.core.errors import WarrenError


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of the package (``__main__`` left out: it runs the CLI)."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(warren.__path__, "warren."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_exception_class_is_a_warren_error_named_in_the_tree() -> None:
    classes = exception_classes()
    assert len(classes) >= 20  # the walk found the package's modules
    tree = errors.__doc__ or ""
    drawn = set(re.findall(r"[├└]── (\w+)", tree)) | {"WarrenError"}
    not_warren = sorted(path for path, cls in classes.items() if not issubclass(cls, WarrenError))
    not_drawn = sorted(path for path, cls in classes.items() if cls.__name__ not in drawn)
    assert not_warren == [], f"not under WarrenError: {not_warren}"
    assert not_drawn == [], f"missing from the tree in warren/core/errors.py: {not_drawn}"


def test_the_tree_draws_each_class_under_its_real_parent() -> None:
    # Each line's indentation says its parent: the tree must not claim a parent the class does not have.
    classes = {cls.__name__: cls for cls in exception_classes().values()}
    stack: list[str] = ["WarrenError"]
    for line in (errors.__doc__ or "").splitlines():
        match = re.match(r"^((?:│   |    )*)[├└]── (\w+)", line)
        if not match:
            continue
        depth = len(match.group(1)) // 4 + 1
        name = match.group(2)
        del stack[depth:]
        assert issubclass(classes[name], classes[stack[-1]]), f"{name} is drawn under {stack[-1]}"
        stack.append(name)
