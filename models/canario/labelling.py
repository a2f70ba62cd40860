"""IO-sensitive / IO-resistant job labelling by nested filters (seed 004 §4.3).

1. drop runs shorter than 1 minute (failed at initialisation) and runs using fewer
   than 30 node-minutes;
2. keep repeated jobs only (unique job = script, user, job name, node count);
3. expected runtime of a unique job = its minimum observed runtime;
4. a run is performance degraded when its runtime exceeds 105 % of the expected;
5. keep runs that overlap at least one probe run;
6. a unique job is **IO-sensitive** when it has degraded runs and every degraded run
   overlapped a degraded probe; **IO-resistant** when none of its runs is degraded
   and at least one overlapped a degraded probe;
7. total-IO consistency: a sensitive job's degraded runs must not have done more IO
   than its expected-runtime runs (else the slowdown came from a changed input deck).

Example
-------
>>> import numpy as np
>>> lab = label_jobs(
...     job_key=np.array(["a", "a", "b", "b"]), start=np.array([0., 5000, 0, 5000]),
...     end=np.array([3600., 9000, 3600, 8600]), num_nodes=np.array([1, 1, 1, 1]),
...     total_io=np.array([1e9, 1e9, 1e6, 1e6]),
...     probe_start=np.array([4000.]), probe_end=np.array([9500.]), probe_degraded=np.array([True]))
>>> lab.label.tolist()        # a: 2nd run 8 % slower during a degraded probe; b: not slower
[1, 1, 0, 0]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SENSITIVE, RESISTANT, UNLABELLED = 1, 0, -1


@dataclass
class JobLabels:
    """Per-run outcome of :func:`label_jobs`."""

    label: np.ndarray            # SENSITIVE / RESISTANT / UNLABELLED per run
    expected_s: np.ndarray       # expected runtime of the run's unique job (NaN if filtered out)
    degraded: np.ndarray         # run slower than threshold × expected
    funnel: dict[str, int]       # runs left after each filter


def unique_job_keys(scripts, users, names, num_nodes) -> np.ndarray:
    """Identifier of a unique job: script text, user, job name and node count (§4.3)."""
    return np.array([f"{u}\x1f{n}\x1f{k}\x1f{s}" for s, u, n, k in zip(scripts, users, names, num_nodes)])


def overlap_count(start: np.ndarray, end: np.ndarray, other_start: np.ndarray, other_end: np.ndarray) -> np.ndarray:
    """How many ``[other_start, other_end)`` intervals overlap each ``[start, end)`` (vectorised)."""
    os_ = np.sort(np.asarray(other_start, float))
    oe = np.sort(np.asarray(other_end, float))
    # intervals starting before our end, minus those already finished at our start
    return np.searchsorted(os_, end, side="left") - np.searchsorted(oe, start, side="right")


def label_jobs(job_key: np.ndarray, start: np.ndarray, end: np.ndarray, num_nodes: np.ndarray,
               total_io: np.ndarray, probe_start: np.ndarray, probe_end: np.ndarray, probe_degraded: np.ndarray,
               threshold: float = 1.05, min_runtime_s: float = 60.0, min_node_minutes: float = 30.0,
               io_tolerance: float = 0.05) -> JobLabels:
    """Apply the §4.3 filters to a table of completed runs and completed probe runs."""
    key = np.asarray(job_key)
    start, end, num_nodes, total_io = (np.asarray(a, float) for a in (start, end, num_nodes, total_io))
    runtime = end - start
    n = runtime.size
    funnel = {"runs": n}
    valid = (runtime >= min_runtime_s) & (runtime * num_nodes >= min_node_minutes * 60.0)
    funnel["after_min_runtime_and_node_minutes"] = int(valid.sum())

    _, group = np.unique(key, return_inverse=True)
    n_groups = group.max() + 1 if n else 0
    runs_per_group = np.bincount(group[valid], minlength=n_groups)
    repeated = valid & (runs_per_group[group] >= 2)
    funnel["after_repeated"] = int(repeated.sum())

    expected_g = np.full(n_groups, np.inf)
    np.minimum.at(expected_g, group[repeated], runtime[repeated])
    expected = np.where(repeated, expected_g[group], np.nan)
    degraded = repeated & (runtime > threshold * expected)

    probe_start = np.asarray(probe_start, float)
    probe_end = np.asarray(probe_end, float)
    probe_degraded = np.asarray(probe_degraded, bool)
    with_probe = repeated & (overlap_count(start, end, probe_start, probe_end) > 0)
    funnel["after_probe_overlap"] = int(with_probe.sum())
    with_bad_probe = with_probe & (overlap_count(start, end, probe_start[probe_degraded],
                                                 probe_end[probe_degraded]) > 0)

    def per_group(mask: np.ndarray) -> np.ndarray:
        return np.bincount(group[mask], minlength=n_groups)

    n_deg = per_group(degraded)
    n_deg_explained = per_group(degraded & with_bad_probe)
    n_bad_probe = per_group(with_bad_probe)
    sensitive_g = (n_deg > 0) & (n_deg_explained == n_deg)
    resistant_g = (n_deg == 0) & (n_bad_probe > 0)
    funnel["after_sensitivity_criteria"] = int((with_probe & (sensitive_g | resistant_g)[group]).sum())

    # total-IO consistency for sensitive jobs: no degraded run did more IO than the expected-runtime runs
    nondeg = repeated & ~degraded
    io_sum = np.bincount(group[nondeg], weights=total_io[nondeg], minlength=n_groups)
    ref_io = io_sum / np.maximum(per_group(nondeg), 1)
    too_much = degraded & (total_io > (1 + io_tolerance) * ref_io[group])
    ok_io = per_group(too_much) == 0
    sensitive_g &= ok_io

    label = np.full(n, UNLABELLED)
    label[repeated & sensitive_g[group]] = SENSITIVE
    label[repeated & resistant_g[group]] = RESISTANT
    funnel["labelled_runs"] = int((label != UNLABELLED).sum())
    funnel["sensitive_jobs"] = int(sensitive_g.sum())
    funnel["resistant_jobs"] = int(resistant_g.sum())
    return JobLabels(label=label, expected_s=expected, degraded=degraded, funnel=funnel)
