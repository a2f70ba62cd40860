"""How much of each canonical sensor the input really delivers, and from which raw names.

A site's mapping (``sensors.toml``) can silently miss a vendor's names; training
then sees a sensor that is NaN on half the nodes.  :class:`SensorCoverage` counts,
per canonical sensor, the share of node-steps with a value, which raw names fed it
and which raw names fed nothing, per node and per hardware group (explicit labels,
else the BMC family whose marker names the node reports (``sensors.toml``
``[families]``, with ``families=mapping.family_of``), else the node's set of raw sensor
names: nodes of one BMC model report the same names).  :meth:`SensorCoverage.warnings`
names every sensor below a threshold with the nodes and groups that lack it.

Example
-------
>>> import numpy as np
>>> cov = SensorCoverage(sensors=("cpu_temp", "cpu_fan_rpm"))
>>> cov.add_raw("n1", "CPU1 Temp", "cpu_temp"); cov.add_raw("n1", "Fan1 RPM", None)
>>> cov.add_raw("n2", "CPU Temp", "cpu_temp"); cov.add_raw("n2", "FAN1", "cpu_fan_rpm")
>>> v = np.full((2, 4, 2), np.nan); v[:, :, 0] = 40.0; v[1, :, 1] = 5000.0
>>> cov.add_grid(["n1", "n2"], v)
>>> r = cov.report()
>>> r["sensors"]["cpu_temp"]["share"], r["sensors"]["cpu_fan_rpm"]["share"], r["unmapped"][0]["name"]
(1.0, 0.5, 'Fan1 RPM')
>>> cov.warnings(threshold=0.6)[0].split(":")[0]
'cpu_fan_rpm'
"""
from __future__ import annotations

import hashlib
from collections import Counter
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from hpcguard.connectors.netdev import add_traffic, netdev_report, netdev_warnings
from hpcguard.models.features import CANONICAL_SENSORS

TOP_UNMAPPED = 20  # raw names listed in a report
TOP_SIGNATURES = 40  # raw-name signature groups listed in a report
NAMED_NODES = 8  # node names a warning spells out before it says "and N more"
MERGED_POLLS = 0.01  # share of a source's polls merged into an occupied grid step above which coverage warns
# what SensorMapping.family_of answers when no marker matches: the raw-name signature
# then tells BMC models apart better than one catch-all group
UNRECOGNISED_FAMILIES = ("other", "no-sensors")


class SensorCoverage:
    """Accumulates per-node sensor presence and raw-name use; JSON-able :meth:`report`.

    The report groups nodes twice: ``groups`` by explicit label (BMC family) or
    signature, ``signatures`` by raw-name signature (one BMC model / firmware each).

    Parameters
    ----------
    sensors
        Canonical sensors to report on (default: all ten).
    groups
        Optional ``{node: hardware group label}``; nodes without a label are grouped
        by their BMC family, else by their raw-name signature.
    families
        Raw names of a node → its BMC family (e.g. :meth:`SensorMapping.family_of
        <hpcguard.connectors.mapping.SensorMapping.family_of>`); ``'other'`` or
        ``'no-sensors'`` means none is recognised.
    """

    def __init__(self, sensors: Sequence[str] = CANONICAL_SENSORS, groups: Mapping[str, str] | None = None,
                 families: Callable[[Iterable[str]], str] | None = None):
        self.sensors = tuple(sensors)
        self._family_of = families
        self._index = {s: i for i, s in enumerate(self.sensors)}
        self._groups: dict[str, str] = dict(groups or {})
        self._steps: dict[str, int] = {}
        self._present: dict[str, np.ndarray] = {}
        self._raw: dict[tuple[str, str | None], Counter] = {}  # (raw name, canonical) → {node: count}
        self._names: dict[str, set[str]] = {}  # node → raw names seen
        self._mismatch: dict[tuple[str, str, str | None], Counter] = {}  # (raw, canonical, unit) → {node: count}
        self._units: dict[str, set[str]] = {}  # unmapped raw name → units of its numeric readings
        # procnetdev: node → {iface: (rx, tx, rx in jobs, tx in jobs)}, node → rows in jobs, summed patterns
        self._netdev: dict[str, dict[str, tuple[float, ...]]] = {}
        self._netdev_jobs: dict[str, int] = {}
        self._netdev_patterns: tuple[str, ...] = ()
        self._polls: dict[str, dict[str, np.ndarray]] = {}  # source → node → [polls, moved, merged] on the grid

    # -- feeding ------------------------------------------------------------------------------------
    def set_group(self, node: str, group: str) -> None:
        """Label ``node`` with a hardware group (vendor family, rack, generation...)."""
        self._groups[node] = group

    def add_raw(self, node: str, raw_name: str, canonical: str | None, count: int = 1,
                unit: str | None = None) -> None:
        """``count`` readings of ``raw_name`` on ``node`` that fed ``canonical`` (``None``: unmapped);
        ``unit`` of an unmapped reading with a number (a candidate for the mapping)."""
        self._raw.setdefault((raw_name, canonical), Counter())[node] += count
        self._names.setdefault(node, set()).add(raw_name)
        if canonical is None and unit:
            self._units.setdefault(raw_name, set()).add(unit)

    def add_unit_mismatch(self, node: str, raw_name: str, canonical: str, unit: str | None, count: int = 1) -> None:
        """``count`` readings of a mapped ``raw_name`` left out because ``unit`` is not ``canonical``'s."""
        self._mismatch.setdefault((raw_name, canonical, unit), Counter())[node] += count
        self._names.setdefault(node, set()).add(raw_name)

    def add_interface_traffic(self, traffic: Mapping[str, Mapping[str, Sequence[float]]],
                              job_rows: Mapping[str, int], patterns: Sequence[str]) -> None:
        """Bytes per node and interface of a ``procnetdev`` file (:func:`~hpcguard.connectors.netdev.
        interface_traffic`) and the ``netdev_interfaces`` ``patterns`` that chose what bytes_in/out sum."""
        add_traffic(self._netdev, traffic)
        for node, n in job_rows.items():
            self._netdev_jobs[node] = self._netdev_jobs.get(node, 0) + int(n)
        self._netdev_patterns = tuple(patterns)

    def add_polls(self, node: str, source: str, polls: int, moved: int, merged: int) -> None:
        """``polls`` polls of ``source`` on ``node`` placed on the grid (:func:`~hpcguard.models.grid.poll_steps`),
        of which ``moved`` took the next step (theirs was taken) and ``merged`` shared a step with an earlier one."""
        per_node = self._polls.setdefault(source, {})
        per_node[node] = per_node.get(node, np.zeros(3, np.int64)) + np.array([polls, moved, merged], np.int64)

    def add_counts(self, node: str, present: Mapping[str, int] | np.ndarray, steps: int) -> None:
        """``steps`` node-steps of ``node``, of which ``present[sensor]`` had a value."""
        row = self._present.get(node)
        if row is None:
            row = self._present[node] = np.zeros(len(self.sensors), np.int64)
        if isinstance(present, Mapping):
            for s, n in present.items():
                if s in self._index:
                    row[self._index[s]] += int(n)
        else:
            row += np.asarray(present, np.int64)
        self._steps[node] = self._steps.get(node, 0) + int(steps)

    def add_grid(self, nodes: Sequence[str], values: np.ndarray, sensors: Sequence[str] | None = None) -> None:
        """A ``(n_nodes, n_steps, n_sensors)`` grid (NaN = missing) whose last axis is ``sensors``
        (default: this accumulator's sensors)."""
        sensors = list(self.sensors if sensors is None else sensors)
        values = np.asarray(values, float)
        if values.ndim != 3 or values.shape[0] != len(nodes) or values.shape[2] != len(sensors):
            raise ValueError(f"grid shape {values.shape} does not match {len(nodes)} nodes × {len(sensors)} sensors")
        cols = [sensors.index(s) if s in sensors else -1 for s in self.sensors]
        have = np.isfinite(values).sum(axis=1)  # (n_nodes, n_sensors_in)
        counts = np.where(np.array(cols) >= 0, have[:, np.maximum(cols, 0)], 0) if cols else have[:, :0]
        for node, row in zip(nodes, counts):
            self.add_counts(str(node), row, values.shape[1])

    def merge(self, other: "SensorCoverage", steps: bool = True) -> None:
        """Add another accumulator's counts (same sensors) into this one; ``steps=False``: raw names only."""
        if steps and other.sensors != self.sensors:
            raise ValueError(f"cannot merge coverage of {other.sensors} into coverage of {self.sensors}")
        for node, n in other._steps.items() if steps else ():
            self.add_counts(node, other._present[node], n)
        for key, nodes in other._raw.items():
            self._raw.setdefault(key, Counter()).update(nodes)
        for raw, units in other._units.items():
            self._units.setdefault(raw, set()).update(units)
        for key, nodes in other._mismatch.items():
            self._mismatch.setdefault(key, Counter()).update(nodes)
        for node, names in other._names.items():
            self._names.setdefault(node, set()).update(names)
        for node, g in other._groups.items():
            self._groups.setdefault(node, g)
        if self._family_of is None:
            self._family_of = other._family_of
        if other._netdev:
            self.add_interface_traffic(other._netdev, other._netdev_jobs, other._netdev_patterns)
        for source, per_node in other._polls.items():
            for node, (n, moved, merged) in per_node.items():
                self.add_polls(node, source, int(n), int(moved), int(merged))

    # -- reading ------------------------------------------------------------------------------------
    def signature_of(self, node: str) -> str:
        """``names-<hash>`` of the node's set of raw sensor names (one BMC model and firmware)."""
        names = self._names.get(node)
        if not names:
            return "no-ipmi-names"
        return "names-" + hashlib.sha1("\n".join(sorted(names)).encode()).hexdigest()[:8]

    def family_of(self, node: str) -> str | None:
        """The BMC family the node's raw names mark (``families``), or ``None`` when none is recognised."""
        names = self._names.get(node)
        if not names or self._family_of is None:
            return None
        family = self._family_of(names)
        return None if family in UNRECOGNISED_FAMILIES else family

    def group_of(self, node: str) -> str:
        """The node's explicit group, else its recognised BMC family, else its raw-name signature."""
        return self._groups.get(node) or self.family_of(node) or self.signature_of(node)

    def _node_shares(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        nodes = sorted(self._steps)
        steps = np.array([self._steps[n] for n in nodes], np.int64)
        present = (np.stack([self._present[n] for n in nodes]) if nodes
                   else np.zeros((0, len(self.sensors)), np.int64))
        return nodes, steps, present

    def report(self) -> dict:
        """``{"nodes", "node_steps", "sensors": {s: {share, with_value, node_steps, raw_names,
        nodes_below_half}}, "groups": {g: {nodes, example_nodes, shares}}, "signatures": {...},
        "unmapped": [{name, readings, nodes, units}], "unit_mismatch": [...]}``, and ``netdev``
        (:meth:`netdev_report`) after procnetdev data; unmapped names with numeric readings
        (a unit) come first."""
        nodes, steps, present = self._node_shares()
        total = int(steps.sum())
        fed: dict[str, Counter] = {s: Counter() for s in self.sensors}
        unmapped: list[tuple[str, int, int]] = []
        for (raw, canonical), per_node in self._raw.items():
            if canonical is None:
                unmapped.append((raw, sum(per_node.values()), len(per_node)))
            elif canonical in fed:
                fed[canonical][raw] += sum(per_node.values())
        with np.errstate(invalid="ignore", divide="ignore"):
            node_share = present / steps[:, None]
        sensors = {}
        for j, s in enumerate(self.sensors):
            with_value = int(present[:, j].sum()) if nodes else 0
            sensors[s] = {"share": round(with_value / total, 4) if total else 0.0, "with_value": with_value,
                          "node_steps": total, "raw_names": dict(fed[s].most_common()),
                          "nodes_below_half": int((node_share[:, j] < 0.5).sum()) if nodes else 0}
        group_report = self._group_shares(nodes, steps, present, self.group_of)
        signatures = self._group_shares(nodes, steps, present, self.signature_of)
        for sig, rep in signatures.items():
            rep["group"] = self.group_of(nodes[rep.pop("_first")])
            rep["raw_names"] = len(self._names.get(rep["example_nodes"][0], ()))
        for rep in group_report.values():
            rep.pop("_first")
        # measured quantities (a unit) first: those are the names a site may want to map
        unmapped.sort(key=lambda u: (u[0] not in self._units, -u[2], -u[1], u[0]))
        report = {"nodes": len(nodes), "node_steps": total, "sensors": sensors, "groups": group_report,
                  "signatures": dict(list(signatures.items())[:TOP_SIGNATURES]), "signature_count": len(signatures),
                  "unmapped": [{"name": n, "readings": c, "nodes": k, "units": sorted(self._units.get(n, ()))}
                               for n, c, k in unmapped[:TOP_UNMAPPED]],
                  "unmapped_names": len(unmapped),
                  "unit_mismatch": [{"name": n, "canonical": c, "unit": u, "readings": sum(k.values()),
                                     "nodes": len(k)}
                                    for (n, c, u), k in sorted(self._mismatch.items(),
                                                               key=lambda kv: -sum(kv[1].values()))[:TOP_UNMAPPED]]}
        if self._netdev:
            report["netdev"] = self.netdev_report()
        if self._polls:
            report["polls"] = self.polls_report()
        return report

    def polls_report(self) -> dict:
        """Per source: ``{polls, moved, merged, moved_share, merged_share, nodes_merging, most_merged}``:
        how the grid placed the polls (jitter moved them to the next step, or two shared a step)."""
        out = {}
        for source, per_node in sorted(self._polls.items()):
            counts = np.array(list(per_node.values()), np.int64).reshape(-1, 3)
            n, moved, merged = counts.sum(axis=0).tolist()
            worst = sorted(((c[2] / c[0], node) for node, c in per_node.items() if c[2]), reverse=True)
            out[source] = {"polls": n, "moved": moved, "merged": merged,
                           "moved_share": round(moved / n, 4) if n else 0.0,
                           "merged_share": round(merged / n, 4) if n else 0.0,
                           "nodes_merging": len(worst),
                           "most_merged": [{"node": node, "merged_share": round(share, 4)}
                                           for share, node in worst[:NAMED_NODES]]}
        return out

    def _group_shares(self, nodes: list[str], steps: np.ndarray, present: np.ndarray, label) -> dict:
        """``{label: {nodes, example_nodes, shares, _first}}``, largest group first."""
        groups: dict[str, list[int]] = {}
        for i, n in enumerate(nodes):
            groups.setdefault(label(n), []).append(i)
        out = {}
        for g, idx in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            st = int(steps[idx].sum())
            pr = present[idx].sum(axis=0)
            out[g] = {"nodes": len(idx), "example_nodes": [nodes[i] for i in idx[:3]], "_first": idx[0],
                      "shares": {s: round(int(pr[j]) / st, 4) if st else 0.0 for j, s in enumerate(self.sensors)}}
        return out

    def netdev_report(self) -> dict:
        """Which interfaces fed bytes_in/bytes_out and their share of the traffic
        (:func:`~hpcguard.connectors.netdev.netdev_report`); ``{}`` without procnetdev data."""
        return netdev_report(self._netdev, self._netdev_jobs, self._netdev_patterns) if self._netdev else {}

    def warnings(self, threshold: float = 0.5) -> list[str]:
        """One line per canonical sensor whose share of node-steps is below ``threshold``,
        naming the nodes and groups that lack it; one per network interface left out of
        ``netdev_interfaces`` that is a node's busiest; one per source whose polls merged on the grid
        above 1 %."""
        extra = (netdev_warnings(self.netdev_report(), NAMED_NODES) if self._netdev else []) + self._poll_warnings()
        nodes, steps, present = self._node_shares()
        total = int(steps.sum())
        if not total:
            return (["no node-steps seen: coverage unknown"] if self.sensors else []) + extra
        with np.errstate(invalid="ignore", divide="ignore"):
            node_share = present / steps[:, None]
        out = []
        for j, s in enumerate(self.sensors):
            share = present[:, j].sum() / total
            if share >= threshold:
                continue
            low = [nodes[i] for i in np.flatnonzero(node_share[:, j] < threshold)]
            by_group = Counter(self.group_of(n) for n in low)
            named = ", ".join(low[:NAMED_NODES]) + (f" and {len(low) - NAMED_NODES} more" if len(low) > NAMED_NODES
                                                     else "")
            groups = ", ".join(f"{g} ({k} nodes)" for g, k in by_group.most_common(6))
            out.append(f"{s}: {share:.0%} of node-steps have a value (below {threshold:.0%}); "
                       f"{len(low)} of {len(nodes)} nodes below: {named}; groups: {groups}")
        return out + extra

    def _poll_warnings(self, threshold: float = MERGED_POLLS) -> list[str]:
        out = []
        for source, rep in self.polls_report().items():
            if rep["polls"] and rep["merged_share"] > threshold:
                named = ", ".join(f"{w['node']} ({w['merged_share']:.0%})" for w in rep["most_merged"])
                out.append(f"{source}: {rep['merged_share']:.1%} of polls shared a grid step with an earlier poll "
                           f"(merged: the later reading kept) on {rep['nodes_merging']} nodes: {named}; polls come "
                           f"faster than the grid, or jitter more than worker.poll_tolerance_s")
        return out


def coverage_of_grid(nodes: Iterable[str], values: np.ndarray, sensors: Sequence[str] = CANONICAL_SENSORS
                     ) -> SensorCoverage:
    """A :class:`SensorCoverage` of one grid alone (no raw-name information)."""
    cov = SensorCoverage(sensors=tuple(sensors))
    cov.add_grid(list(nodes), values, sensors)
    return cov
