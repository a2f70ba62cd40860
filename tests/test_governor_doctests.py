"""The docstring examples of the governor, adapters and Slurm modules run (and must pass)."""
import doctest

import pytest

from hpcguard.connectors import adapters, governor, slurm


@pytest.mark.parametrize("module", [governor, adapters, slurm], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
