"""SWF reader and trace statistics (FARS Tab. 2)."""
from __future__ import annotations

import gzip
import io
import json
import os

import pytest

from hpcguard.connectors.swf import load_swf, parse_swf, trace_stats
from _shared import SHARED_DATA

NASA = str(SHARED_DATA / "workloads/NASA-iPSC-1993-3.1-cln.swf.gz")

SMALL = """; Version: 2.2
; MaxNodes: 4
; UnixStartTime: 1000
    1   0   0   10   2  -1 -1  2  20 -1 1 1 1 -1 -1 -1 -1 -1
    2   5  -1   10   2  -1 -1  2  -1 -1 1 2 1 -1 -1 -1 -1 -1
    3   7  -1    0   1  -1 -1  1  -1 -1 0 2 1 -1 -1 -1 -1 -1
    4  20   0   10  -1  -1 -1  4  30 -1 1 3 1 -1 -1 -1 -1 -1
"""


def test_parse_fields_header_and_skips():
    wl = parse_swf(io.StringIO(SMALL))
    assert wl.max_nodes == 4 and wl.header["UnixStartTime"] == "1000"
    assert wl.job_id.tolist() == [1, 2, 4]            # job 3 has no runtime → skipped
    assert wl.skipped == 1
    assert wl.size.tolist() == [2, 2, 4]              # allocated −1 → requested processors
    assert wl.requested_time.tolist() == [20, -1, 30]
    assert wl.user.tolist() == [1, 2, 3]


def test_gzip_file_roundtrip(tmp_path):
    path = tmp_path / "t.swf.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(SMALL)
    wl = load_swf(path)
    assert len(wl) == 3 and float(wl.runtime.sum()) == 30.0


def test_bad_line_names_line():
    with pytest.raises(ValueError, match=":2:"):
        parse_swf(io.StringIO("; x\n1 2 3\n"))
    with pytest.raises(FileNotFoundError):
        load_swf("/nonexistent/file.swf")


KNOWN = SMALL.replace("    2   5  -1", "    2   5   0")  # every wait known


def test_trace_stats_hand_computed():
    # 4 nodes; jobs: [0,10) 2 nodes, [5,15) 2 nodes, [20,30) 4 nodes → busy 2,4,2,0,4 over 0..30
    wl = parse_swf(io.StringIO(KNOWN))
    s = trace_stats(wl)
    assert s["schedule"] == "recorded" and s["unknown_waits"] == 0
    assert s["span_days"] == pytest.approx(30 / 86400)
    assert s["utilization"] == pytest.approx((20 + 20 + 40) / (4 * 30)) == pytest.approx(s["offered_load"])
    # ≥ 2 % of 4 nodes idle ⇔ at least one idle node: [0,5) [10,15) [15,20) → 15 s of 30
    assert s["p_idle_2pct"] == pytest.approx(15 / 30)
    assert s["max_concurrent_busy"] == 4


def test_unknown_wait_is_not_zero():
    """Wait -1 is unknown: no schedule statistics, only the offered load, labelled as such."""
    s = trace_stats(parse_swf(io.StringIO(SMALL)))
    assert s["schedule"] == "unknown_waits" and s["unknown_waits"] == 1 and "unknown wait" in s["note"]
    assert s["utilization"] is None and s["p_idle_2pct"] is None and s["max_concurrent_busy"] is None
    assert s["offered_load"] == pytest.approx(80 / (4 * 30))


def test_over_capacity_schedule_is_refused():
    text = "; MaxNodes: 2\n1 0 0 10 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1\n2 5 0 10 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"
    s = trace_stats(parse_swf(io.StringIO(text)))
    assert s["schedule"] == "over_capacity" and s["peak_demand_nodes"] == 4 and s["utilization"] is None
    assert s["offered_load"] == pytest.approx(40 / (2 * 15))


REAL = str(SHARED_DATA / "real-formats/swf")


@pytest.mark.skipif(not os.path.isdir(REAL), reason="real-formats corpus not available")
@pytest.mark.parametrize("name, offered, first", [("lublin_256.swf", 1.0569, (1, 5094, 12072, 16)),
                                                   ("lublin-aaroh.swf", 0.03645, (1, 4272, 40, 1))])
def test_lublin_models_report_offered_load_only(name, offered, first):
    """Lublin-Feitelson model workloads (all waits -1): 10,000 jobs on 256 nodes, no impossible schedule."""
    wl = load_swf(os.path.join(REAL, name))
    assert len(wl) == 10000 and wl.max_nodes == 256 and int(wl.size.max()) <= 256
    assert (int(wl.job_id[0]), wl.submit[0], wl.runtime[0], int(wl.size[0])) == first
    s = trace_stats(wl)
    assert s["schedule"] == "unknown_waits" and s["unknown_waits"] == 10000
    assert s["utilization"] is None and s["max_concurrent_busy"] is None
    assert s["offered_load"] == pytest.approx(offered, rel=1e-3)


@pytest.mark.skipif(not os.path.exists(NASA), reason="NASA iPSC trace not available")
def test_nasa_ipsc_offered_load_matches_fars_table2():
    """FARS Tab. 2, NASA iPSC row: 128 CPUs, 18,239 jobs, 46.7 % — the trace has no wait times (its submit
    times are start times, and they need 176 nodes at once), so this is offered load, not a utilization."""
    s = trace_stats(load_swf(NASA))
    assert s["nodes"] == 128 and s["jobs"] == 18239 and s["schedule"] == "unknown_waits"
    assert s["offered_load"] == pytest.approx(0.467, abs=0.005)
    assert s["utilization"] is None and s["max_concurrent_busy"] is None


def test_cli_trace_stats_json(tmp_path):
    from typer.testing import CliRunner

    from hpcguard.cli import app

    path = tmp_path / "t.swf"
    path.write_text(SMALL)
    out = CliRunner().invoke(app, ["trace", "stats", str(path), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert {"jobs", "nodes", "span_days", "utilization", "p_idle_2pct", "offered_load", "schedule"} <= set(data)
    assert data["nodes"] == 4 and data["schedule"] == "unknown_waits" and data["utilization"] is None
    text = CliRunner().invoke(app, ["trace", "stats", str(path)])
    assert text.exit_code == 0 and "offered load" in text.output and "not a utilization" in text.output
    bad = CliRunner().invoke(app, ["trace", "stats", str(tmp_path / "missing.swf")])
    assert bad.exit_code != 0
