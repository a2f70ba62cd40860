"""The docstring examples of the ingest modules for sacct, LDMS, hostlists and SWF run (and must pass)."""
import doctest

import pytest

from hpcguard.connectors import hostlist, ldms, sacct, swf
from hpcguard.models import counters
from hpcguard.simulators import failures


@pytest.mark.parametrize("module", [sacct, ldms, hostlist, swf, counters, failures], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
