"""The docstring examples of the streaming core run in the suite."""
import doctest
import importlib

import pytest

MODULES = ["hpcguard.models.jobs", "hpcguard.models.grid", "hpcguard.models.canario.online",
           "hpcguard.streams.plumbing", "hpcguard.streams.cluster_view", "hpcguard.connectors.replay"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
