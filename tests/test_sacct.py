import pytest

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.sacct import decode_slurm_envelope, job_events, parse_slurm_time, parse_timelimit, read_sacct
from hpcguard.streams.records import JobEvent

HEADER = "JobID|JobName|User|Partition|NNodes|NodeList|Submit|Start|End|Timelimit|State|ExitCode"
SACCT = f"""{HEADER}
101|cfd|alice|batch|2|n[001-002]|2023-03-24T18:00:00|2023-03-24T18:01:00|2023-03-24T19:00:00|1-00:00:00|COMPLETED|0:0
101.batch|batch|||1|n001|2023-03-24T18:01:00|2023-03-24T18:01:00|2023-03-24T19:00:00||COMPLETED|0:0
101.0|pw.x|||2|n[001-002]|2023-03-24T18:01:00|2023-03-24T18:01:00|2023-03-24T19:00:00||COMPLETED|0:0
102|md|bob|gpu|1|None assigned|2023-03-24T18:30:00|Unknown|Unknown|30:00|PENDING|0:0
103|bad|bob|gpu|1|n5|2023-03-24T18:30:00|yesterday|Unknown|30:00|RUNNING|0:0
104|short|bob|gpu|1|n5
105_7|arr|carol|batch|1|n[5-6]|2023-03-24T18:40:00|2023-03-24T18:41:00|Unknown|UNLIMITED|CANCELLED by 1000|0:15
abc|x|y|z|1|n1|2023-03-24T18:40:00|Unknown|Unknown|10|PENDING|0:0
"""


def test_read_sacct_records_and_rejects(tmp_path):
    p = tmp_path / "sacct.txt"
    p.write_text(SACCT)
    out = list(read_sacct(p, source="slurm/sacct.txt"))
    jobs = [r for r in out if isinstance(r, dict)]
    assert [j["job_id"] for j in jobs] == ["101", "102", "105_7"]  # steps skipped
    assert [(r.line, r.kind) for r in out if isinstance(r, Rejected)] == [(6, "bad_time"), (7, "bad_row"),
                                                                           (9, "bad_row")]
    j = jobs[0]
    assert j["nodes"] == ["n001", "n002"] and j["num_nodes"] == 2 and j["time_limit_s"] == 86400.0
    assert j["end_time"] - j["start_time"] == 3540.0 and j["source"] == "slurm/sacct.txt:2"
    assert jobs[1]["nodes"] == [] and jobs[1]["start_time"] is None
    assert jobs[2]["state"] == "CANCELLED" and jobs[2]["time_limit_s"] is None


def test_events_carry_only_what_was_known(tmp_path):
    p = tmp_path / "sacct.txt"
    p.write_text(SACCT)
    jobs = [r for r in read_sacct(p) if isinstance(r, dict)]
    envs = job_events(jobs[0])
    assert [(e["event"], e["time"]) for e in envs] == [("submit", jobs[0]["submit_time"]),
                                                       ("start", jobs[0]["start_time"]),
                                                       ("end", jobs[0]["end_time"])]
    events = [decode_slurm_envelope(e) for e in envs]
    assert [e["state"] for e in events] == ["PENDING", "RUNNING", "COMPLETED"]
    assert events[0]["nodes"] == [] and events[0]["end_time"] is None and events[0]["num_nodes"] == 2
    assert events[1]["nodes"] == ["n001", "n002"] and events[1]["end_time"] is None
    assert events[2]["end_time"] == jobs[0]["end_time"] and events[2]["exit_code"] == "0:0"
    assert JobEvent(**events[2]).job_id == "101"  # the fields of the canonical record
    assert [e["event"] for e in job_events(jobs[1])] == ["submit"]


def test_bad_envelopes():
    line = "101|cfd|alice|batch|2|n[001-002]|2023-03-24T18:00:00|Unknown|Unknown|10:00|PENDING|0:0"
    good = {"format": "sacct-parsable2", "header": HEADER, "line": line, "event": "submit", "time": 1.0,
            "source": "slurm/sacct.txt:17"}
    assert decode_slurm_envelope(good)["time_limit_s"] == 600.0
    for change, kind in [({"format": "csv"}, "unknown_format"), ({"event": "explode"}, "bad_row"),
                         ({"time": None}, "bad_time"), ({"line": None}, "missing_field"),
                         ({"line": line.replace("n[001-002]", "n[2-1]")}, "bad_hostlist"),
                         ({"line": line.replace("|2|", "|two|")}, "bad_number")]:
        with pytest.raises(ParseError) as err:
            decode_slurm_envelope({**good, **change})
        assert err.value.kind == kind
        assert err.value.line == 17


@pytest.mark.parametrize("text, seconds", [("10", 600.0), ("10:30", 630.0), ("01:02:03", 3723.0),
                                           ("2-03", 2 * 86400 + 3 * 3600.0), ("2-03:04", 183840.0),
                                           ("2-03:04:05", 183845.0), ("UNLIMITED", None), ("", None)])
def test_timelimit(text, seconds):
    assert parse_timelimit(text) == seconds


def test_bad_timelimit_and_time():
    with pytest.raises(ParseError):
        parse_timelimit("ten minutes")
    assert parse_slurm_time("1970-01-01T00:01:00") == 60.0
    assert parse_slurm_time("Unknown") is None
    with pytest.raises(ParseError):
        parse_slurm_time("24/03/2023")


def test_dialects_delimiter_trailing_jobidraw_noheader(tmp_path):
    from hpcguard.connectors.sacct import SacctDialect

    p = tmp_path / "semi.txt"  # sacct -p --delimiter=';' with JobIDRaw only
    p.write_text("JobIDRaw;State;NodeList;Submit;\n7;COMPLETED;n[1-2];2023-03-24T18:00:00;\n7.batch;COMPLETED;n1;;\n")
    (job,) = list(read_sacct(p, dialect=SacctDialect(delimiter=";")))
    assert job["job_id"] == "7" and job["nodes"] == ["n1", "n2"] and job["num_nodes"] == 2
    assert job["submit_time"] == parse_slurm_time("2023-03-24T18:00:00")
    env = job_events(job)[0]
    assert env["delimiter"] == ";" and decode_slurm_envelope(env)["job_id"] == "7"
    q = tmp_path / "noheader.txt"  # --noheader: the column list comes from the settings
    q.write_text("8|RUNNING|2023-03-24T18:00:00\n")
    (job,) = list(read_sacct(q, dialect=SacctDialect(columns=("JobID", "State", "Start"), timezone="Europe/Berlin")))
    assert job["start_time"] == parse_slurm_time("2023-03-24T17:00:00") and job["state"] == "RUNNING"
    with pytest.raises(ParseError, match="no JobID or JobIDRaw"):
        list(read_sacct(q, dialect=SacctDialect()))


def test_time_zone_setting_and_offsets():
    from hpcguard.connectors.sacct import SacctDialect
    from hpcguard.settings import Settings

    assert SacctDialect.from_settings(Settings()).timezone == "UTC"
    s = Settings.load(env={"HPCGUARD_SACCT__TIMEZONE": "America/Chicago", "HPCGUARD_SACCT__DELIMITER": ";"})
    d = SacctDialect.from_settings(s)
    assert (d.timezone, d.delimiter) == ("America/Chicago", ";")
    assert parse_slurm_time("2023-07-01T12:00:00", tz=d.timezone) == parse_slurm_time("2023-07-01T17:00:00")
    assert parse_slurm_time("2023-07-01T12:00:00+0200", tz=d.timezone) == parse_slurm_time("2023-07-01T10:00:00")
    assert parse_slurm_time("1688212800") == 1688212800.0  # SLURM_TIME_FORMAT=%s
    with pytest.raises(ValueError, match="unknown time zone"):
        SacctDialect(timezone="Mars/Olympus")
