"""Every docstring example of the package runs in the suite (and must pass)."""
import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

LAYERS = ("hpcguard.models", "hpcguard.connectors", "hpcguard.simulators", "hpcguard.streams", "hpcguard.cli")


def _modules_with_examples() -> list[str]:
    names = ["hpcguard", "hpcguard.settings", "hpcguard.jsonable"]
    for layer in LAYERS:
        package = importlib.import_module(layer)
        names.append(layer)
        names += [m.name for m in pkgutil.walk_packages(package.__path__, layer + ".")]
    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and spec.origin.endswith(".py") and ">>>" in Path(spec.origin).read_text():
            found.append(name)
    return found


MODULES = _modules_with_examples()


def test_the_examples_are_found():
    # discovery must see the layers' modules: an empty list would pass every example vacuously
    assert len(MODULES) >= 60 and "hpcguard.models.failure.evaluation" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    # a module whose examples all need outside parts (the broker binary) marks them +SKIP
    assert result.failed == 0 and (result.attempted > 0 or "doctest: +SKIP" in Path(module.__file__).read_text())
