"""sacct dumps written by other projects (../shared/data/real-formats/sacct, PROVENANCE.md there)."""
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

import pytest

from hpcguard.connectors.errors import Rejected
from hpcguard.connectors.sacct import SacctDialect, decode_slurm_envelope, job_events, read_sacct
from _shared import SHARED_DATA

DIR = SHARED_DATA / "real-formats/sacct"
pytestmark = pytest.mark.skipif(not DIR.is_dir(), reason="real-formats corpus not available")
UTC = SacctDialect()


def _read(name, dialect=UTC):
    stats = {}
    out = list(read_sacct(DIR / name, dialect=dialect, stats=stats))
    return [r for r in out if isinstance(r, dict)], [r for r in out if isinstance(r, Rejected)], stats


def _epoch(text):
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


def test_epcc_cirrus_matches_safe_expected_parse():
    """``sacct -p`` (trailing '|', JobIDRaw, no NodeList) in Europe/London = SAFE's own parse, all 28 records."""
    jobs, rejected, stats = _read("safe_cirrus_acct.txt", SacctDialect(timezone="Europe/London"))
    assert rejected == [] and stats == {"jobs": 72, "steps": 207, "rejected": 0}
    root = ET.parse(DIR / "safe_cirrus_expected.xml").getroot()
    expected = [{c.tag: c.text for c in r} for r in root.iter("CirrusSlurm")]
    assert len(expected) == 28
    by_key = {(j["job_id"], j["start_time"]): j for j in jobs}
    for e in expected:
        j = by_key[(e["JobID"], float(e["Start"]))]
        assert j["submit_time"] == float(e["Submit"]) and j["end_time"] == float(e["End"])
        assert j["num_nodes"] == int(e["AllocNodes"]) and j["time_limit_s"] * 1000 == int(e["Timelimit"])
        assert (j["user"], j["partition"], j["name"]) == (e["User"], e["Partition"], e["JobName"])
    first = by_key[("18432", 1593916475.0)]
    assert first["submit_time"] == 1593792833.0  # 2020-07-03T17:13:53 BST
    # read as UTC, every time would be 3,600 s late: the time-zone setting is what makes it right
    utc = {j["job_id"]: j for j in _read("safe_cirrus_acct.txt")[0]}
    assert utc["18432"]["submit_time"] - first["submit_time"] == 3600.0
    running = next(j for j in jobs if j["job_id"] == "11999")
    assert running["state"] == "RUNNING" and running["end_time"] is None and running["num_nodes"] == 4
    assert [e["event"] for e in job_events(running)] == ["submit", "start"]


def test_cirrus_envelopes_carry_delimiter_and_zone():
    jobs, _, _ = _read("safe_cirrus_acct.txt", SacctDialect(timezone="Europe/London"))
    job = next(j for j in jobs if j["job_id"] == "18432")
    envs = job_events(job)
    assert {e["tz"] for e in envs} == {"Europe/London"} and "delimiter" not in envs[0]
    events = [decode_slurm_envelope(e) for e in envs]  # the worker re-parses the row with the same zone
    assert [(e["event"], e["time"]) for e in events] == [("submit", 1593792833.0), ("start", 1593916475.0),
                                                         ("end", 1593996743.0)]
    assert events[2]["submit_time"] == 1593792833.0 and events[2]["num_nodes"] == 1


def test_ceems_offsets_honoured_with_configured_columns():
    """CEEMS's rows have 19 fields under a 20-name header: dead-lettered as is; with the column list CEEMS
    really requested (``--noheader``), SubmitTS is CEEMS's 1676986622000 ms (the +0100 offset honoured)."""
    jobs, rejected, _ = _read("ceems_tz_offset.txt")
    assert jobs == [] and [r.line for r in rejected] == [2, 3, 4]
    assert all(r.kind == "bad_row" and "19 '|'-separated fields under a 20-column header" in r.reason
               for r in rejected)
    header = (DIR / "ceems_tz_offset.txt").read_text().splitlines()[0].split("|")
    columns = header[:15] + ["AllocTRES"] + header[17:]
    # the zone setting does not touch times that carry their own offset
    jobs, rejected, stats = _read("ceems_tz_offset.txt", SacctDialect(columns=tuple(columns), timezone="Asia/Tokyo"))
    assert rejected == [] and stats["jobs"] == 3
    j = jobs[0]
    assert j["job_id"] == "1479763" and j["submit_time"] * 1000 == 1676986622000
    assert j["start_time"] == 1676986627.0 and j["end_time"] == 1676989589.0
    assert j["num_nodes"] == 2 and j["nodes"] == ["compute-0"] and j["state"] == "CANCELLED"  # node=2 of AllocTRES
    assert jobs[1]["nodes"] == ["compute-0", "compute-1", "compute-2"] and jobs[1]["num_nodes"] == 1


def test_gcm_format_all_found_by_name(tmp_path):
    """``sacct --parsable2 --format=ALL`` (109 columns, header starts with Account): 68 step rows, no job rows."""
    jobs, rejected, stats = _read("gcm_sample-sacct-output.txt")
    assert jobs == [] and rejected == [] and stats == {"jobs": 0, "steps": 68, "rejected": 0}
    lines = (DIR / "gcm_sample-sacct-output.txt").read_text().splitlines()
    as_job = lines[1].replace("8012944_24093.0|8084960.0|", "8012944_24093|8084960|")
    p = tmp_path / "all.txt"  # the same row as a job (step suffix removed)
    p.write_text(lines[0] + "\n" + as_job + "\n")
    (job,) = [r for r in read_sacct(p, dialect=UTC)]
    assert job["job_id"] == "8012944_24093" and job["nodes"] == ["node077"] and job["num_nodes"] == 1
    assert (job["submit_time"], job["start_time"], job["end_time"]) == (
        _epoch("2020-11-16T11:59:11"), _epoch("2020-11-16T11:59:11"), _epoch("2020-11-16T11:59:59"))
    assert job["state"] == "COMPLETED" and job["user"] == "" and job["exit_code"] == "0:0"


def test_gcm_broken_record_is_dead_lettered_not_the_file():
    jobs, rejected, stats = _read("gcm_sample-sacct-output-with-invalid-lines.txt")
    assert jobs == [] and len(rejected) == 1 and stats["rejected"] == 1
    r = rejected[0]
    assert r.line == 2 and r.kind == "bad_row" and "record broken across lines" in r.reason
    assert r.payload.startswith("lpha-0.0-ed|volta32gb|")


def test_gcm_midnight_job_state_end_only():
    """``sacct -P -o JobID,State,End``: no Submit/Start columns; each job gives only its end event."""
    jobs, rejected, stats = _read("gcm_sample-sacct-output-midnight-edge-case-small.txt")
    assert rejected == [] and stats == {"jobs": 3, "steps": 8, "rejected": 0}
    assert [j["job_id"] for j in jobs] == ["39125549", "39125551", "39125552"]
    assert {j["state"] for j in jobs} == {"CANCELLED"}
    assert jobs[0]["end_time"] == _epoch("2021-04-07T23:59:38") and jobs[0]["submit_time"] is None
    (env,) = job_events(jobs[0])
    ev = decode_slurm_envelope(env)
    assert ev["event"] == "end" and ev["time"] == _epoch("2021-04-07T23:59:38") and ev["nodes"] == []
