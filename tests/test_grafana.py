"""Grafana provisioning and dashboards: every query names only what hpcguard writes.

InfluxQL queries may only reference measurements, tags and fields that the sink's
line-protocol schema (``connectors.lineprotocol.SCHEMA``) produces; Prometheus queries
only metric names in ``streams.metrics.REGISTRY``.  With the ``influxdb`` fixture every
InfluxQL query also runs against a real InfluxDB 1.6 holding points written by the sink,
and must return data.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml

from hpcguard.connectors.influx import InfluxSink, V1Writer
from hpcguard.connectors.lineprotocol import measurement_fields
from hpcguard.streams.metrics import REGISTRY
from hpcguard.streams.records import ACK_STATUSES, ACTION_KINDS

GRAFANA = Path(__file__).resolve().parents[1] / "compose" / "grafana"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
FROM = re.compile(r'\bFROM\s+"([^"]+)"', re.IGNORECASE)
ALIAS = re.compile(r'\bAS\s+"([^"]+)"', re.IGNORECASE)
COMPARED = re.compile(r'"(\w+)"\s*(?:=|!=|<>)\s*\'([^\']*)\'')
PROM_NAME = re.compile(r"\bhpcguard_[a-z0-9_]+\b")


def _datasources() -> dict[str, dict]:
    data = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "hpcguard.yaml").read_text())
    return {d["uid"]: d for d in data["datasources"]}


def _queries() -> list[tuple[str, str, str, str]]:
    """(dashboard, where, datasource type, query) for every panel target, variable and annotation."""
    out = []
    for path in DASHBOARDS:
        d = json.loads(path.read_text())
        for p in d["panels"]:
            for t in p["targets"]:
                ds = t.get("datasource") or p["datasource"]
                out.append((path.name, f"panel {p['title']!r}", ds["type"], t.get("query") or t.get("expr")))
        for v in d["templating"]["list"]:
            if v.get("type") == "query":
                out.append((path.name, f"variable {v['name']}", v["datasource"]["type"], v["query"]))
        for a in d["annotations"]["list"]:
            if "query" in a:
                out.append((path.name, f"annotation {a['name']}", a["datasource"]["type"], a["query"]))
    return out


def _influxql() -> list[tuple[str, str, str]]:
    return [(d, w, q) for d, w, t, q in _queries() if t == "influxdb"]


def _prometheus_names() -> set[str]:
    names = set()
    for family in REGISTRY.collect():
        suffixes = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
                    "gauge": ("",), "summary": ("_sum", "_count", "")}[family.type]
        names.update(family.name + s for s in suffixes)
    return names


def test_dashboards_exist_and_are_well_formed():
    names = {p.stem for p in DASHBOARDS}
    assert {"cluster-overview", "node-risk", "io-health", "actions"} <= names
    uids, datasources = set(), _datasources()
    for path in DASHBOARDS:
        d = json.loads(path.read_text())
        assert d["uid"] not in uids and len(d["uid"]) <= 40, path.name
        uids.add(d["uid"])
        assert d["title"] and d["panels"], path.name
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), f"{path.name}: duplicate panel ids"
        for p in d["panels"]:
            assert p["targets"], f"{path.name}: panel {p['title']!r} has no query"
            for t in p["targets"]:
                ds = t.get("datasource") or p["datasource"]
                assert ds["uid"] in datasources and datasources[ds["uid"]]["type"] == ds["type"], p["title"]
            g = p["gridPos"]
            assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]


def test_provisioning_points_at_the_dashboards_and_services():
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "hpcguard.yaml").read_text())["providers"]
    assert providers[0]["options"]["path"] == "/var/lib/grafana/dashboards"
    ds = _datasources()
    assert ds["hpcguard-influx"]["jsonData"]["version"] == "InfluxQL"
    assert ds["hpcguard-prometheus"]["type"] == "prometheus"


def test_influxql_references_only_what_the_sink_writes():
    schema = measurement_fields()
    queries = _influxql()
    assert queries
    used = set()
    for dash, where, q in queries:
        measurements = FROM.findall(q)
        assert measurements, f"{dash} {where}: no FROM \"measurement\" in {q!r}"
        unknown = set(measurements) - set(schema)
        assert not unknown, f"{dash} {where}: measurements {unknown} are not written by the sink"
        allowed = set().union(*(schema[m]["tags"] | schema[m]["fields"] for m in measurements))
        aliases = set(ALIAS.findall(q))
        names = set(QUOTED.findall(q)) - set(measurements) - aliases
        assert names <= allowed, f"{dash} {where}: {names - allowed} not tags/fields of {measurements}"
        for key, value in COMPARED.findall(q):
            known = {"status": ACK_STATUSES, "kind": ACTION_KINDS}.get(key)
            assert known is None or value in known, f"{dash} {where}: {key} = {value!r} never written"
        used.update(measurements)
    assert used == set(schema), f"measurements without a panel: {set(schema) - used}"


def test_prometheus_queries_use_registered_metrics():
    names = _prometheus_names()
    exprs = [(d, w, q) for d, w, t, q in _queries() if t == "prometheus"]
    assert exprs
    for dash, where, q in exprs:
        found = PROM_NAME.findall(q)
        assert found, f"{dash} {where}: no hpcguard metric in {q!r}"
        assert set(found) <= names, f"{dash} {where}: unknown metrics {set(found) - names}"
        assert q.count("(") == q.count(")"), f"{dash} {where}: unbalanced parentheses"
    used = {n for _, _, q in exprs for n in PROM_NAME.findall(q)}
    families = {f.name for f in REGISTRY.collect()}
    assert {n for n in families if not any(u.startswith(n) for u in used)} == set(), "metrics without a panel"


def _write_dataset(url: str, db: str) -> None:
    now = time.time()
    sink = InfluxSink(V1Writer(url, db), background=False)
    for i in range(20):
        t = now - 1800 + 60 * i
        for node in ("n001", "n002"):
            sink.add("NodeSample", {"node": node, "time": t, "source": "ipmi",
                                    "values": {"cpu_temp": 50.0 + i, "psu_temp": 40.0}})
            sink.add("NodeSample", {"node": node, "time": t, "source": "ldms:meminfo",
                                    "values": {"mem_usage": 30.0, "load_1min": 1.0}})
            warn = node == "n002" and i > 15
            sink.add("NodePrediction", {"node": node, "time": t, "model": "ensemble", "model_version": "1",
                                        "failure_probability": 0.9 if warn else 0.05, "warn": warn,
                                        "lead_minutes": 4.0 if warn else 0.0,
                                        "network_probabilities": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]})
        feats = {f"{d}_{s}": 1e9 for d in ("read", "write") for s in ("min", "max", "median", "mean", "var", "std")}
        sink.add("IoDegradation", {"system": "lustre", "window_start": t - 60, "window_end": t, "model": "knn",
                                   "features": feats, "degraded": i > 10, "probability": i / 20})
        sink.add("ProbeResult", {"probe_id": f"p{i}", "probe_type": "ior", "start": t - 20, "end": t,
                                 "runtime_s": 20.0, "ratio": 1.0 + i / 100})
    sink.add("Action", {"action_id": "a1", "kind": "checkpoint", "source": "failure-ensemble", "time": now - 200,
                        "job_id": "42", "nodes": ["n002"], "deadline": now + 40, "reason": {"lead_minutes": 4}})
    for status in ("applied", "failed"):
        sink.add("ActionAck", {"action_id": "a1", "status": status, "adapter": "dry-run", "time": now - 199,
                               "kind": "checkpoint", "job_id": "42", "nodes": ["n002"], "detail": "ok"})
    sink.close()
    assert sink.stats["written"] == sink.stats["queued"]


@pytest.mark.influx
def test_every_influxql_query_returns_data_from_a_real_influxdb(influxdb):
    db = "grafana_check"
    _write_dataset(influxdb.url, db)
    for dash, where, q in _influxql():
        concrete = (q.replace("$timeFilter", "time > now() - 2h").replace("$__interval", "1m")
                    .replace("$node", ".*").replace("$system", ".*"))
        result = influxdb.query(concrete, db)[0]
        assert result.get("series"), f"{dash} {where}: no data for {concrete!r}"
