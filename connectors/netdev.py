"""Which network interfaces feed ``bytes_in``/``bytes_out``, and whether one of them is the job network.

``procnetdev`` reports every interface (``rx_bytes#eno1``, ``rx_bytes#hsn0``...); the
``[ldms] netdev_interfaces`` patterns pick the ones summed into ``bytes_in``/``bytes_out``.
A job network left out of that list (a Slingshot ``hsn0`` under a list written for
Ethernet and InfiniBand) leaves the values to the management NIC, and nothing else shows
it.  :func:`interface_traffic` measures each interface's bytes per node (during jobs when
the rows carry a ``job_id``); :func:`netdev_report` says which interfaces fed the values
and their share of the traffic; :func:`netdev_warnings` names an interface left out that is
a node's busiest: during jobs, the busiest interface is the job network.

Example
-------
>>> import numpy as np
>>> t = np.array([0.0, 15.0, 0.0, 15.0]); names = np.array(["n1", "n1", "n2", "n2"])
>>> cols = {"rx_bytes#eno1": np.array([0, 1e3, 0, 2e3]), "tx_bytes#eno1": np.array([0, 1e3, 0, 2e3]),
...         "rx_bytes#hsn0": np.array([0, 9e6, 0, 8e6]), "tx_bytes#hsn0": np.array([0, 9e6, 0, 8e6])}
>>> traffic, job_rows = interface_traffic(t, names, cols, max_gap_s=75.0)
>>> traffic["n1"]["hsn0"][:2], job_rows
((9000000.0, 9000000.0), {'n1': 0, 'n2': 0})
>>> fabric_of("hsn0"), fabric_of("ib0"), fabric_of("hfi1_0"), fabric_of("eno1"), fabric_of("veth12ab")
('slingshot', 'infiniband', 'omni-path', 'ethernet', 'virtual')
"""
from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Mapping, Sequence

import numpy as np

from hpcguard.models.counters import counter_deltas

# the interface families HPC nodes carry, in the order a job network is likelier to be one of them;
# fnmatch patterns as in [ldms] netdev_interfaces
FABRICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("slingshot", ("hsn*",)),
    ("infiniband", ("ib*",)),
    ("omni-path", ("opa*", "hfi*")),
    ("bond", ("bond*",)),
    ("ethernet", ("eth*", "en*")),
)
LOOPBACK = ("lo",)
# bridges and container/VM interfaces repeat the traffic of a physical one: never the job network
VIRTUAL = ("veth*", "docker*", "virbr*", "br-*", "cni*", "flannel*", "cali*", "vxlan*", "tun*", "tap*", "vnet*")
# an interface left out must carry this much more than the counted ones together to be named:
# a bond whose members are counted carries about their sum, not more
BUSIER = 1.05
DIRECTIONS = ("rx_bytes", "tx_bytes")


def fabric_of(iface: str) -> str:
    """``slingshot``, ``infiniband``, ``omni-path``, ``bond``, ``ethernet``, ``loopback``, ``virtual`` or ``other``."""
    if iface in LOOPBACK:
        return "loopback"
    if any(fnmatchcase(iface, p) for p in VIRTUAL):
        return "virtual"
    for fabric, patterns in FABRICS:
        if any(fnmatchcase(iface, p) for p in patterns):
            return fabric
    return "other"


def counted(iface: str, patterns: Sequence[str]) -> bool:
    """Whether ``iface`` is summed into bytes_in/bytes_out under ``patterns`` (``lo`` never is)."""
    return iface not in LOOPBACK and any(fnmatchcase(iface, p) for p in patterns)


def suggestion(iface: str) -> str:
    """The pattern to add to ``netdev_interfaces`` for ``iface``: its fabric's, else its own name."""
    for _, patterns in FABRICS:
        for p in patterns:
            if fnmatchcase(iface, p):
                return p
    return iface


def counter_columns(spec) -> tuple[str, str] | None:
    """The in and out counters (``rx_bytes``, ``tx_bytes``) a schema's ``bytes_in``/``bytes_out`` are rates
    of, or ``None`` when the schema (a ``SchemaSpec``, or ``None``) derives neither."""
    net = {m.canonical: m.columns[0] for m in (spec.derive if spec is not None else ()) if m.kind == "rate"}
    return (net["bytes_in"], net["bytes_out"]) if "bytes_in" in net and "bytes_out" in net else None


def interface_traffic(times: np.ndarray, names: np.ndarray, columns: Mapping[str, np.ndarray], max_gap_s: float,
                      directions: tuple[str, str] = DIRECTIONS
                      ) -> tuple[dict[str, dict[str, tuple[float, float, float, float]]], dict[str, int]]:
    """Bytes each interface moved on each node: ``({node: {iface: (rx, tx, rx_in_jobs, tx_in_jobs)}},
    {node: rows in jobs})`` from a ``procnetdev`` file's per-interface counters
    (``<direction>#<iface>`` columns, ``directions`` = the in and out counters).

    Deltas follow the counter rules of the sensors (a reset or a gap longer than ``max_gap_s``
    counts nothing); a row is in a job when its ``job_id`` column is above 0.
    """
    ifaces = sorted({k.partition("#")[2] for k in columns if "#" in k and k.partition("#")[0] in directions})
    times = np.asarray(times, float)
    if not ifaces or times.size == 0:
        return {}, {}
    cols = [f"{d}#{i}" for i in ifaces for d in directions]
    matrix = np.column_stack([np.asarray(columns[c], float) if c in columns else np.full(times.size, np.nan)
                              for c in cols])
    ids, keys = np.unique(np.asarray(names), return_inverse=True)
    deltas, _, _ = counter_deltas(times, matrix, max_gap_s, keys)
    deltas = np.nan_to_num(deltas, nan=0.0)
    job = np.asarray(columns["job_id"], float) > 0 if "job_id" in columns else np.zeros(times.size, bool)
    total = np.column_stack([np.bincount(keys, weights=deltas[:, j], minlength=ids.size) for j in range(len(cols))])
    in_jobs = np.column_stack([np.bincount(keys[job], weights=deltas[job, j], minlength=ids.size)
                               for j in range(len(cols))])
    job_rows = np.bincount(keys[job], minlength=ids.size)
    out = {}
    for k, node in enumerate(ids):
        out[str(node)] = {iface: (float(total[k, 2 * j]), float(total[k, 2 * j + 1]),
                                  float(in_jobs[k, 2 * j]), float(in_jobs[k, 2 * j + 1]))
                          for j, iface in enumerate(ifaces)}
    return out, {str(n): int(c) for n, c in zip(ids, job_rows)}


def _measured(traffic: Mapping[str, Mapping[str, Sequence[float]]], job_rows: Mapping[str, int]
              ) -> dict[str, dict[str, tuple[float, float]]]:
    """``{node: {iface: (rx, tx)}}``: bytes during jobs on a node with job rows, else all its bytes."""
    out = {}
    for node, per_iface in traffic.items():
        jobs = job_rows.get(node, 0) > 0
        out[node] = {i: ((v[2], v[3]) if jobs else (v[0], v[1])) for i, v in per_iface.items()}
    return out


def _busiest_left_out(node_traffic: Mapping[str, tuple[float, float]], patterns: Sequence[str]) -> str | None:
    """The node's busiest physical interface when it is left out and busier than the counted ones together."""
    physical = {i: rx + tx for i, (rx, tx) in node_traffic.items() if fabric_of(i) not in ("loopback", "virtual")}
    if not physical:
        return None
    busiest = max(sorted(physical), key=physical.__getitem__)
    fed = sum(b for i, b in physical.items() if counted(i, patterns))
    if counted(busiest, patterns) or physical[busiest] <= BUSIER * fed:
        return None
    return busiest


def netdev_report(traffic: Mapping[str, Mapping[str, Sequence[float]]], job_rows: Mapping[str, int],
                  patterns: Sequence[str]) -> dict:
    """``{netdev_interfaces, nodes, nodes_measured_in_jobs, fed_by, interfaces: {iface: {fabric, counted,
    nodes, bytes_in, bytes_out, share}}, busiest_left_out: {iface: [nodes]}}``; ``share``: of the bytes
    of every physical interface (not ``lo``, bridges or container interfaces)."""
    measured = _measured(traffic, job_rows)
    per_iface: dict[str, list] = {}
    for per_node in measured.values():
        for iface, (rx, tx) in per_node.items():
            acc = per_iface.setdefault(iface, [0.0, 0.0, 0])
            acc[0] += rx
            acc[1] += tx
            acc[2] += 1
    physical = sum(rx + tx for i, (rx, tx, _) in per_iface.items() if fabric_of(i) not in ("loopback", "virtual"))
    left_out: dict[str, list[str]] = {}
    for node in sorted(measured):
        busiest = _busiest_left_out(measured[node], patterns)
        if busiest is not None:
            left_out.setdefault(busiest, []).append(node)
    interfaces = {}
    for iface, (rx, tx, n) in sorted(per_iface.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        interfaces[iface] = {"fabric": fabric_of(iface), "counted": counted(iface, patterns), "nodes": n,
                             "bytes_in": rx, "bytes_out": tx,
                             "share": float(f"{(rx + tx) / physical:.4g}") if physical else 0.0}
    return {"netdev_interfaces": list(patterns), "nodes": len(measured),
            "nodes_measured_in_jobs": sum(1 for n in measured if job_rows.get(n, 0) > 0),
            "fed_by": [i for i, r in interfaces.items() if r["counted"]],
            "interfaces": interfaces, "busiest_left_out": left_out}


def _percent(share: float) -> str:
    """``'97%'``; a share that rounds to nothing but is not nothing is ``'<1%'``."""
    return f"{share:.0%}" if share >= 0.005 or share == 0 else "<1%"


def netdev_warnings(report: Mapping, named_nodes: int = 8) -> list[str]:
    """One line per interface left out of ``netdev_interfaces`` that is some node's busiest
    (more than the counted interfaces together), from a :func:`netdev_report`."""
    out = []
    ifaces = report["interfaces"]
    fed = report["fed_by"]
    fed_text = (", ".join(f"{i} ({_percent(ifaces[i]['share'])})" for i in fed) if fed else "no interface")
    in_jobs = report["nodes_measured_in_jobs"]
    when = ("during jobs" if in_jobs == report["nodes"] else "over the recording (no row names a job)" if not in_jobs
            else f"during jobs ({report['nodes'] - in_jobs} nodes ran none: over their whole recording)")
    for iface, nodes in sorted(report["busiest_left_out"].items(), key=lambda kv: -len(kv[1])):
        named = ", ".join(nodes[:named_nodes]) + (f" and {len(nodes) - named_nodes} more"
                                                 if len(nodes) > named_nodes else "")
        share = _percent(ifaces[iface]["share"])
        out.append(f"bytes_in/bytes_out: {iface} ({fabric_of(iface)}, {share} of the traffic) "
                   f"is the busiest interface {when} on {len(nodes)} of {report['nodes']} nodes ({named}) but "
                   f"[ldms] netdev_interfaces ({', '.join(report['netdev_interfaces'])}) leaves it out: the values "
                   f"come from {fed_text}; a node's busiest interface during jobs is its job network: add "
                   f"'{suggestion(iface)}'")
    return out


def add_traffic(into: dict, traffic: Mapping[str, Mapping[str, Sequence[float]]]) -> None:
    """Add ``traffic`` (``{node: {iface: 4 numbers}}``) into ``into`` in place."""
    for node, per_iface in traffic.items():
        mine = into.setdefault(node, {})
        for iface, v in per_iface.items():
            old = mine.get(iface)
            mine[iface] = tuple(v) if old is None else tuple(a + b for a, b in zip(old, v))
