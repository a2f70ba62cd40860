"""SWF reader and trace statistics (FARS Tab. 2)."""
from __future__ import annotations

import gzip
import io
import json
import os

import numpy as np
import pytest

from hpcguard.connectors.swf import load_swf, parse_swf, trace_stats

NASA = "/work/shared/data/workloads/NASA-iPSC-1993-3.1-cln.swf.gz"

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


def test_trace_stats_hand_computed():
    # 4 nodes; jobs: [0,10) 2 nodes, [5,15) 2 nodes, [20,30) 4 nodes → busy 2,4,2,0,4 over 0..30
    wl = parse_swf(io.StringIO(SMALL))
    s = trace_stats(wl)
    assert s["span_days"] == pytest.approx(30 / 86400)
    assert s["utilization"] == pytest.approx((20 + 20 + 40) / (4 * 30))
    # ≥ 2 % of 4 nodes idle ⇔ at least one idle node: [0,5) [10,15) [15,20) → 15 s of 30
    assert s["p_idle_2pct"] == pytest.approx(15 / 30)


@pytest.mark.skipif(not os.path.exists(NASA), reason="NASA iPSC trace not available")
def test_nasa_ipsc_matches_fars_table2():
    """FARS Tab. 2, NASA iPSC row: 128 CPUs, 18,239 jobs, util 46.7 %, P(≥2 % idle) 79.2 %."""
    s = trace_stats(load_swf(NASA))
    assert s["nodes"] == 128 and s["jobs"] == 18239
    assert s["utilization"] == pytest.approx(0.467, abs=0.005)
    # the trace's submit times are start times (no queueing) → idle nodes slightly more common
    assert 0.70 < s["p_idle_2pct"] < 0.792 + 0.06


def test_cli_trace_stats_json(tmp_path):
    from typer.testing import CliRunner

    from hpcguard.cli import app

    path = tmp_path / "t.swf"
    path.write_text(SMALL)
    out = CliRunner().invoke(app, ["trace", "stats", str(path), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert {"jobs", "nodes", "span_days", "utilization", "p_idle_2pct"} <= set(data)
    assert data["nodes"] == 4
    bad = CliRunner().invoke(app, ["trace", "stats", str(tmp_path / "missing.swf")])
    assert bad.exit_code != 0
