"""The demo's PFS scenario: episodes placed for online learning, probes stretched, replayed."""
import csv

import numpy as np
import pytest

from hpcguard.connectors.replay import dry_run, iter_recorded
from hpcguard.models.canario.detector import LateLabeler
from hpcguard.models.canario.probes import PROBE_TYPES
from hpcguard.simulators.demo_scenario import BASELINE_RUNS, pfs_scenario

T0 = 1_679_682_800.0


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    out = tmp_path_factory.mktemp("pfs")
    return out, pfs_scenario(str(out), start=T0, hours=2.0, seed=7, nodes=8)


def _probes(out):
    with open(out / "probes.csv") as fh:
        return list(csv.DictReader(fh))


def test_slowdown_matches_the_telemetry_grid_and_episodes(scenario):
    _, sc = scenario
    slow = sc["io_slowdown"]
    assert slow.shape == (7200,) and (slow >= 1).all()
    (e1, e2) = [(ep["start"] - T0, ep["end"] - T0) for ep in sc["summary"]["episodes"]]
    assert e1[1] <= e2[0]
    # episode 2 begins once episode 1's windows can have been labelled (the labeler's timeout)
    assert e2[0] >= e1[0] + LateLabeler().timeout_s
    assert sc["summary"]["expected_detectable"]
    for a, b in (e1, e2):
        mid = slow[int(a + 0.3 * (b - a)):int(a + 0.7 * (b - a))]
        assert np.median(mid) > 2.0  # severe
    quiet = np.ones(slow.size, bool)
    for a, b in (e1, e2):
        quiet[int(a):int(b)] = False
    assert np.median(slow[quiet]) < 1.05
    assert float(sc["env"]["HPCGUARD_WORKER__IO_INITIAL_BANK_H"]) < 2.0
    assert int(sc["env"]["HPCGUARD_WORKER__PROBE_BASELINE_RUNS"]) == BASELINE_RUNS


def test_probes_stretch_with_the_slowdown_and_baseline_is_healthy(scenario):
    out, sc = scenario
    rows = _probes(out)
    assert len(rows) == sc["summary"]["probes"] > 0
    e1_start = sc["summary"]["episodes"][0]["start"]
    expected = {p.name: p.expected_runtime_s for p in PROBE_TYPES}
    slow = sc["io_slowdown"]
    ratio, mean_slow = [], []
    for ptype in expected:
        runs = sorted((r for r in rows if r["probe_type"] == ptype), key=lambda r: float(r["end"]))
        assert all(float(r["end"]) < e1_start for r in runs[:BASELINE_RUNS])  # healthy baseline
        for r in runs:
            a, b = int(float(r["start"]) - T0), int(float(r["end"]) - T0)
            ratio.append(float(r["runtime_s"]) / expected[ptype])
            mean_slow.append(slow[a:b].mean())
    ratio, mean_slow = np.array(ratio), np.array(mean_slow)
    assert (ratio[mean_slow > 1.5] > 1.3).all()
    assert (np.abs(ratio[mean_slow < 1.02] - 1) < 0.08).all()
    assert float(max(r["end"] for r in rows)) <= T0 + 7200


def test_replay_publishes_probes_in_end_time_order(scenario):
    out, sc = scenario
    msgs = [m for m in iter_recorded([out]) if getattr(m, "kind", "") == "probes"]
    assert len(msgs) == sc["summary"]["probes"]
    ends = [m.value["end"] for m in msgs]
    assert ends == sorted(ends)
    assert {m.topic for m in msgs} == {"hpcguard.probes"}
    assert set(msgs[0].value) == {"probe_id", "probe_type", "node", "start", "end", "runtime_s", "v"}
    assert msgs[0].key == msgs[0].value["probe_id"]
    report = dry_run([out])
    assert report["records"]["probes"] == report["samples"]["probes"] == sc["summary"]["probes"]
    assert report["errors"] == {}  # degradation.csv is ground truth, not an unknown file


def test_bad_probe_rows_are_rejected(tmp_path):
    (tmp_path / "probes.csv").write_text("probe_id,probe_type,node,start,end,runtime_s\n"
                                         "p1,probe-3,n001,10.0,530.0,520.0\n"
                                         "p2,probe-3,n001,10.0,oops,520.0\n"
                                         "p3,probe-3,n001,600.0,100.0,500.0\n")
    report = dry_run([tmp_path])
    assert report["samples"]["probes"] == 1
    assert report["errors"] == {"bad_probe": 2}


@pytest.fixture(scope="module")
def with_jobs(tmp_path_factory):
    from hpcguard.simulators.demo_scenario import write_job_scripts
    from hpcguard.simulators.telemetry import simulate_telemetry

    out = tmp_path_factory.mktemp("jobs")
    simulate_telemetry(str(out), nodes=8, hours=1.0, seed=7)
    return out, write_job_scripts(str(out), seed=7)


def test_job_scripts_ride_on_submit_events(with_jobs):
    from hpcguard.connectors.sacct import decode_slurm_envelope

    out, made = with_jobs
    labels = {r["job_id"]: r for r in csv.DictReader((out / "jobscripts" / "sensitivity.csv").read_text().splitlines())}
    assert made["jobs"] == len(labels) > 0 and 0 < made["io_sensitive"] < made["jobs"]
    slurm = [m for m in iter_recorded([out]) if getattr(m, "kind", "") == "slurm"]
    submits = [m for m in slurm if m.value["event"] == "submit"]
    assert {m.key for m in submits} == set(labels)
    for m in submits:
        text = (out / "jobscripts" / f"{m.key}.sh").read_text()
        assert m.value["script"] == text and text.startswith("#!/bin/bash")
        ev = decode_slurm_envelope(m.value)
        assert ev["script"] == text and ev["event"] == "submit"
    assert all("script" not in m.value for m in slurm if m.value["event"] != "submit")
    assert dry_run([out])["errors"] == {}  # jobscripts/ is not replayed as telemetry


def test_script_must_be_text():
    from hpcguard.connectors.errors import ParseError
    from hpcguard.connectors.sacct import FORMAT, decode_slurm_envelope

    header = "JobID|JobName|User|Partition|NNodes|NodeList|State|Submit|Start|End|Timelimit|ExitCode"
    line = "9|x|u|p|1|n001|PENDING|2024-01-01T00:00:00|Unknown|Unknown|01:00:00|0:0"
    env = {"format": FORMAT, "header": header, "line": line, "event": "submit", "time": 1.0, "source": "s:2"}
    assert "script" not in decode_slurm_envelope(env)
    assert decode_slurm_envelope({**env, "script": "#!/bin/sh\n"})["script"] == "#!/bin/sh\n"
    with pytest.raises(ParseError):
        decode_slurm_envelope({**env, "script": 42})


def test_pretrained_classifier_tells_the_demo_jobs_apart(with_jobs, tmp_path):
    from hpcguard.connectors.canario_io import load_job_classifier
    from hpcguard.simulators.demo_scenario import train_job_classifier

    out, _ = with_jobs
    done = train_job_classifier(str(tmp_path / "clf.pt"), seed=2007, hours=3.0)
    assert 200 < done["jobs"] <= 500 and 0 < done["io_sensitive"] < done["jobs"]  # §4.4: at most 500 jobs
    clf = load_job_classifier(done["path"])
    rows = list(csv.DictReader((out / "jobscripts" / "sensitivity.csv").read_text().splitlines()))
    p = clf.predict_many([(out / "jobscripts" / f"{r['job_id']}.sh").read_text() for r in rows])
    truth = np.array([r["io_sensitive"] == "1" for r in rows])
    assert ((p >= 0.5) == truth).mean() >= 0.7  # another seed's history, other templates


def test_offline_io_windows_go_on_when_a_node_falls_silent(with_jobs, tmp_path):
    """The offline twin of the worker's io role: a node that stops sending (failed, not repaired) goes idle
    and does not hold the system's windows back; every full minute of the recording is judged, in order."""
    import shutil

    from hpcguard.simulators.demo_scenario import offline_io_actions

    out, _ = with_jobs
    data = tmp_path / "rec"
    shutil.copytree(out, data)
    f = data / "ldms" / "lustre_client.csv"
    lines = f.read_text().splitlines(keepends=True)
    t0 = float(lines[1].split(",")[0])
    kept = [x for x in lines[1:] if not (x.split(",")[2] == "n001" and float(x.split(",")[0]) > t0 + 600)]
    f.write_text(lines[0] + "".join(kept))
    done = offline_io_actions(str(data), {})
    ends = [w[0] for w in done["windows"]]
    assert ends == sorted(ends) and ends[-1] >= t0 + 3600 - 120  # past n001's silence, up to the last minute
    assert len(ends) >= 58 and done["actions"] == []  # the detector's initial bank (24 h) is not full yet
