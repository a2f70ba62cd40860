"""Probe statistics (seed 004 §4.2, Tab. 4.1)."""
import numpy as np
import pytest

from hpcguard.models.canario.probes import PROBE_TYPES, ProbeTracker, probe_node_hours, probe_ratios


def test_tab_4_1_probe_types():
    # Tab. 4.1: total write IO, files per process, expected runtime of the five MACSio probes
    assert [p.name for p in PROBE_TYPES] == [f"probe-{i}" for i in range(1, 6)]
    assert [p.expected_runtime_s for p in PROBE_TYPES] == [1396, 1023, 519, 521, 1408]
    assert [p.total_write_gb for p in PROBE_TYPES] == [100, 100, 2, 100, 100]
    assert [p.files_per_process for p in PROBE_TYPES] == [10, 100, 100, 10, 100]
    assert all(p.nodes == 1 and p.processes == 36 for p in PROBE_TYPES)


def test_expected_is_median_of_first_n_runs_and_then_frozen():
    rng = np.random.default_rng(0)
    first = rng.normal(500, 5, 100)
    t = ProbeTracker()  # n_baseline=100, threshold=1.05 (§4.2.2)
    for r in first:
        out = t.observe("probe-3", r)
    assert out["baseline_complete"]
    assert t.expected("probe-3") == pytest.approx(np.median(first))
    # later (even very slow) runs do not move the expectation
    t.observe("probe-3", 5000.0)
    assert t.expected("probe-3") == pytest.approx(np.median(first))


def test_threshold_105_percent_and_severity():
    t = ProbeTracker(n_baseline=1)
    t.observe("p", 100.0)
    at = t.observe("p", 105.0)
    above = t.observe("p", 106.0)
    assert not at["degraded"] and at["ratio"] == pytest.approx(1.05)
    assert above["degraded"] and above["ratio"] == pytest.approx(1.06)


def test_provisional_expectation_before_baseline():
    t = ProbeTracker(n_baseline=5)
    t.observe("p", 100.0)
    out = t.observe("p", 300.0)
    assert not out["baseline_complete"]
    assert out["expected_s"] == pytest.approx(200.0)


@pytest.mark.parametrize("bad", [0.0, -3.0, float("nan")])
def test_bad_runtime_rejected(bad):
    with pytest.raises(ValueError):
        ProbeTracker().observe("p", bad)


def test_vectorised_ratios_match_tracker():
    rng = np.random.default_rng(1)
    types = rng.choice(["a", "b"], 40)
    runtime = rng.uniform(90, 130, 40)
    end = np.cumsum(rng.uniform(1, 5, 40))
    _exp, ratio = probe_ratios(types, runtime, end, n_baseline=8)
    t = ProbeTracker(n_baseline=8)
    online = [t.observe(ty, r)["ratio"] for ty, r in zip(types, runtime)]
    # after each type's baseline is complete the online ratio equals the vectorised one
    for i in range(40):
        if (types[: i + 1] == types[i]).sum() >= 8:
            assert online[i] == pytest.approx(ratio[i])


def test_probe_node_hours():
    assert probe_node_hours(np.array([1800.0, 3600.0])) == pytest.approx(1.5)
