"""The cluster simulator's failure spec takes the same durations as the other commands."""
import numpy as np
import pytest

from hpcguard.simulators.failures import parse_failure_spec


def _spec(text, nodes=8, days=60):
    return parse_failure_spec(text, nodes, days * 86400.0, np.random.default_rng(3))


@pytest.mark.parametrize("a, b", [("weibull:shape=0.7,mtbf=24h", "weibull:shape=0.7,mtbf=24"),
                                  ("weibull:shape=0.7,mtbf=1d", "weibull:shape=0.7,mtbf=24"),
                                  ("exponential:mtbf=90m", "exponential:mtbf=1.5"),
                                  ("exponential:mtbf=336,mttr=45m", "exponential:mtbf=14d,mttr=0.75")])
def test_units_equal_plain_hours(a, b):
    fa, fb = _spec(a), _spec(b)
    assert len(fa) > 0 and np.array_equal(fa.time, fb.time) and np.array_equal(fa.node, fb.node)
    assert fa.source == fb.source


def test_minutes_are_minutes():
    """90m is 1.5 h (≈ 43 failures of 4 nodes in a day with 45 min repairs), not 90 h (≈ 1)."""
    n_minutes = len(parse_failure_spec("exponential:mtbf=90m,mttr=45m", 4, 86400.0, np.random.default_rng(0)))
    n_hours = len(parse_failure_spec("exponential:mtbf=90,mttr=45m", 4, 86400.0, np.random.default_rng(0)))
    assert 25 < n_minutes < 60 and n_hours <= 3


@pytest.mark.parametrize("bad, message", [("weibull:shape=0.7,mtbf=24x", "duration"),
                                          ("exponential:mtbf=0h", "positive"),
                                          ("weibull:shape=fast,mtbf=24h", "number"),
                                          ("exponential:mtbf=1h,rate=3", "unknown")])
def test_bad_specs_name_the_problem(bad, message):
    with pytest.raises(ValueError, match=message):
        _spec(bad)
