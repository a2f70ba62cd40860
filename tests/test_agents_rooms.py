"""Agents in Faust's test context (no broker): what each room publishes for given input."""
import asyncio
import json

from _pipeline import HEALTHY, baseline_model
from hpcguard.settings import Settings
from hpcguard.streams.app import Pipeline, create_app
from hpcguard.streams.decisions import plan_for
from hpcguard.streams.predictors import load_predictor
from hpcguard.streams.topics import TopicNames

T0 = 1_700_000_000.0


def make_app(tmp_path, roles, predictor=None, nodes="", plan=False, max_nodes=None):
    s = Settings()
    s.worker.data_dir = str(tmp_path / "state")
    s.worker.grid_sources = ("ipmi",)
    s.worker.job_wait_s = 0.2
    s.door.nodes = nodes
    if max_nodes is not None:
        s.door.max_nodes = max_nodes
    box: list = []
    pipe = Pipeline(settings=s, topics=TopicNames.from_settings(s.topics), predictor=predictor, outbox=box,
                    roles=frozenset(roles), plan=plan_for(s) if plan else None)
    app = create_app(pipe)
    app.finalize()
    app.conf.store = "memory://"
    app.flow_control.resume()
    return app, box


def agent(app, name):
    return next(a for a in app.agents.values() if a.name.endswith(name))


async def feed(app, name, records):
    async with agent(app, name).test_context() as a:
        for key, value in records:
            await a.put(value if isinstance(value, bytes) else json.dumps(value).encode(), key=key.encode())
        await asyncio.sleep(0.5)  # longer than job_wait_s: a first IO window waits that long for probes


def sample(node, t, **over):
    return node, {"node": node, "time": t, "source": "ipmi", "values": {**HEALTHY, **over}, "v": 1}


def test_windows_predict_by_event_time_and_dead_letter_late_and_bad_records(tmp_path):
    app, box = make_app(tmp_path, {"windows"}, load_predictor(baseline_model(tmp_path / "m")))
    recs = [sample(n, T0 + 15 * k) for k in range(30) for n in ("n1", "n2")]
    recs += [sample("n1", T0), ("n1", b"[" * 5000 + b"]" * 5000), sample("n1;rm -rf", T0 + 1)]
    asyncio.run(feed(app, "node-windows", recs))
    preds = [v for topic, _, v in box if topic.endswith("predictions.node")]
    dead = [v for topic, _, v in box if topic.endswith("dlq")]
    assert {p["node"] for p in preds} == {"n1", "n2"}
    assert all(p["time"] == p["sample_time"] and p["time"] % 15 == 0 for p in preds)
    assert len({(p["node"], p["time"]) for p in preds}) == len(preds)  # one verdict per node and step
    assert sorted(d["error_kind"] for d in dead) == ["bad_id", "late", "too_deep"]


def test_sample_batches_give_what_single_samples_give_and_dead_letter_each_bad_sample(tmp_path):
    """normalize's NodeSamples batches (one per node and input batch) and single NodeSample records: same
    predictions and IO verdicts; a late or invalid sample inside a batch is its own dead letter, the rest stay."""
    steps = [sample(n, T0 + 15 * k) for k in range(30) for n in ("n1", "n2")]
    single = steps[:-4] + [sample("n1", T0)] + steps[-4:]  # a late sample with good ones after it in its batch
    bad = {**sample("n2", T0 + 450)[1], "node": "n2;rm"}

    def batched(records, size):
        by_node: dict[str, list] = {}
        for key, value in records:
            by_node.setdefault(key, []).append(value)
        return [(key, {"samples": values[i:i + size], "v": 1}) for key, values in by_node.items()
                for i in range(0, len(values), size)]

    def outputs(records, name, roles, predictor=None):
        app, box = make_app(tmp_path / f"{name}{len(records)}", roles, predictor)
        asyncio.run(feed(app, name, records))
        kept = [{k: x for k, x in v.items() if k != "ingest_time"} for topic, _, v in box  # wall clock: not compared
                if not topic.endswith("dlq") and not topic.endswith("cluster")]
        return kept, [(d["error_kind"], json.loads(d["payload"]).get("node")) for topic, _, d in box
                      if topic.endswith("dlq")]

    model = load_predictor(baseline_model(tmp_path / "m"))
    one, one_dead = outputs(single, "node-windows", {"windows"}, model)
    many, many_dead = outputs([("n2", {"samples": [bad], "v": 1})] + batched(single, 7), "node-windows",
                              {"windows"}, model)
    assert one and many == one
    assert one_dead == [("late", "n1")] and many_dead == [("bad_id", "n2;rm"), ("late", "n1")]

    io = [("n1", {"node": "n1", "time": T0 + k, "source": "ldms:lustre_client", "v": 1,
                  "values": {"io_read_bytes": 1e9, "io_write_bytes": 2e9}}) for k in range(0, 130)]
    io.append(("n1", {**io[0][1], "time": T0 + 3}))
    io_one, io_one_dead = outputs(io, "io-windows", {"io"})
    io_many, io_many_dead = outputs(batched(io, 50), "io-windows", {"io"})
    assert io_one and io_many == io_one and io_one_dead == io_many_dead == [("late", "n1")]


def test_decide_joins_the_job_running_at_the_warning_time(tmp_path):
    app, box = make_app(tmp_path, {"jobs", "decide"})
    asyncio.run(feed(app, "jobs", [
        ("1", {"job_id": "1", "event": "start", "time": T0, "nodes": ["n8"], "time_limit_s": 7200, "v": 1}),
        ("1", {"job_id": "1", "event": "end", "time": T0 + 3600, "nodes": ["n8"], "v": 1}),
        ("2", {"job_id": "2", "event": "start", "time": T0 + 3600, "nodes": ["n8"], "time_limit_s": 7200, "v": 1}),
    ]))
    warn = {"node": "n8", "model": "m", "model_version": "1", "failure_probability": 0.9, "warn": True,
            "lead_minutes": 20.0, "v": 1}  # no spare node known, 20 min ≥ the 756 s safeguard checkpoint
    asyncio.run(feed(app, "decide", [
        ("n8", {**warn, "time": T0 + 1800, "sample_time": T0 + 1800}),  # job 1 runs then
        ("n8", {**warn, "time": T0 + 1815, "sample_time": T0 + 1815}),  # same episode: no new action
        ("n8", {**warn, "node": 42, "time": T0, "sample_time": T0}),  # a bad record: a dead letter, no crash
    ]))
    actions = [v for topic, _, v in box if topic.endswith("actions")]
    dead = [v for topic, _, v in box if topic.endswith("dlq")]
    assert [(a["kind"], a["job_id"], a["time"]) for a in actions] == [("checkpoint", "1", T0 + 1800)]
    assert "job_join" not in actions[0]["reason"]  # the job stream had passed the warning's time
    assert [d["error_kind"] for d in dead] == ["bad_id"]


# -- internal.cluster is an input: checked at the door, and it cannot grow the spare pool (issue 58 item 1) --------
WARN = {"node": "n8", "model": "m", "model_version": "1", "failure_probability": 0.9, "warn": True,
        "lead_minutes": 20.0, "time": T0 + 1800, "sample_time": T0 + 1800, "v": 1}
RUNNING = [("1", {"job_id": "1", "event": "start", "time": T0, "nodes": ["n8"], "time_limit_s": 7200, "v": 1})]


def test_hostile_cluster_records_are_dead_lettered_with_kind_and_reason(tmp_path):
    app, box = make_app(tmp_path, {"jobs", "decide"}, nodes="n[1-8]")  # configured: valid records count at once
    first = {"node": "n1", "first": T0, "v": 1}
    episode = {"node": "n1", "first_warn": T0, "last_warn": T0 + 60, "v": 1}
    hostile = [
        ({**first, "first": float("nan")}, "not_finite", "first"),
        ({**first, "first": float("inf")}, "not_finite", "first"),
        ({**first, "first": -1e308}, "bad_time", "first"),
        ({**first, "first": True}, "bad_type", "first"),
        ({**first, "first": "1700000000"}, "bad_type", "first"),
        ({**first, "first": 4e9}, "bad_time", "first"),  # the year 2096: ahead of the wall clock
        ({**first, "node": 42}, "bad_id", "node"),
        ({**first, "node": "n1;reboot"}, "bad_id", "node"),
        ({**first, "node": "n9"}, "unknown_node", "node"),  # not in the configured inventory
        ({**first, "spare": 1}, "unknown_field", "spare"),
        ({**first, "first_warn": T0}, "unknown_field", "first_warn"),
        ({**first, "v": 2}, "out_of_range", "v"),
        ({**episode, "last_warn": T0 - 60}, "bad_time", "last_warn"),
        ({**episode, "first_warn": None}, "bad_type", "first_warn"),
        ({"node": "n1"}, "missing_field", "first_warn"),
        ([first], "bad_type", "ClusterUpdate"),
    ]
    asyncio.run(feed(app, "cluster", [("n1", first), ("n1", episode)] + [("n1", rec) for rec, _, _ in hostile]
                     + [("n1", b'{"node": "n1", "first": '), ("n1", b"[" * 5000 + b"]" * 5000)]))
    dead = [v for topic, _, v in box if topic.endswith("dlq")]
    assert [d["error_kind"] for d in dead] == [kind for _, kind, _ in hostile] + ["bad_json", "too_deep"]
    for d, (_, _, field) in zip(dead, hostile):
        assert d["source"].endswith("internal.cluster") and d["reason"].startswith("not a valid ClusterUpdate: ")
        assert d["reason"].removeprefix("not a valid ClusterUpdate: ").startswith(field), d["reason"]
    view = app.hpc.cluster  # the two valid records, and nothing of the others
    assert view.first_seen == {"n1": T0} and view.episodes == {"n1": {"first_warn": T0, "last_warn": T0 + 60}}
    assert [v for topic, _, v in box if not topic.endswith("dlq")] == []


def test_the_broadcast_reader_applies_only_what_passes_the_door_and_names_a_known_node(tmp_path):
    """Every worker's broadcast reader (ClusterView.follow) checks internal.cluster as the cluster agent does and
    skips what fails (the partition's owner dead-letters it): NaN, -1e308 and true as ``first`` were applied,
    and 20,000 invented names all joined the nodes a spare pool is drawn from."""
    from hpcguard.streams.agents_jobs import check_cluster_record

    app, _ = make_app(tmp_path, {"jobs"}, max_nodes=64)
    view = app.hpc.cluster

    def check(kind, raw):
        return check_cluster_record(app, kind, raw)

    bad = [b'{"node": "n1", "first": ' + v + b', "v": 1}' for v in (b"NaN", b"-1e308", b"true", b"1e308")]
    bad.append(b'{"node": "n1", "first_warn": 1700000060, "last_warn": 1700000000}')  # ends before it starts
    assert [view.receive(raw, 0, check) for raw in bad] == [False] * len(bad)
    flood = [json.dumps({"node": f"cflood{i:05d}", "first": T0 - 3600, "v": 1}).encode() for i in range(20_000)]
    assert sum(view.receive(raw, 0, check) for raw in flood) == 64  # held while they wait; the rest refused
    job = {"job_id": "1", "event": "start", "time": T0, "nodes": ["n8"], "v": 1}
    assert view.receive(json.dumps(job).encode(), 0, check, job=True)
    assert view.nodes_at(T0 + 1800) == [] and view.first_seen == {} and len(view.pending) == 64
    inventory = app.hpc.plumbing.inventory  # checking a name does not enrol it; the job record names n8
    assert inventory.known == inventory.named == {"n8"} and not inventory.quarantined


def test_a_cluster_topic_flood_of_invented_nodes_does_not_grow_the_spare_pool(tmp_path):
    """20,000 records {"node": "cfloodNNNNN", "first": ...} on internal.cluster, then one warning: the spare pool
    stays empty (the issue saw spare_nodes 20000 and a migrate); names beyond the pending bound are refused."""
    app, box = make_app(tmp_path, {"jobs", "decide"}, max_nodes=64)
    flood = [(f"cflood{i:05d}", {"node": f"cflood{i:05d}", "first": T0 - 3600, "v": 1}) for i in range(20_000)]
    asyncio.run(feed(app, "cluster", flood))
    asyncio.run(feed(app, "jobs", RUNNING))
    asyncio.run(feed(app, "decide", [("n8", WARN)]))
    actions = [v for topic, _, v in box if topic.endswith("actions")]
    dead = [v for topic, _, v in box if topic.endswith("dlq")]
    assert [(a["kind"], a["job_id"], a["reason"]["inputs"]["spare_nodes"]) for a in actions] == [("checkpoint", "1", 0)]
    assert len(dead) == 20_000 - 64 and {d["error_kind"] for d in dead} == {"unknown_node"}
    assert "cflood19999" in dead[-1]["reason"] and "job record" in dead[-1]["reason"]
    view = app.hpc.cluster
    assert len(view.pending) == 64 and view.nodes_at(T0 + 1800) == []


def test_a_node_from_the_cluster_topic_counts_once_a_job_record_names_it(tmp_path):
    """Another worker's node (known to this one only through internal.cluster) joins the spare pool once a job
    record names it; with a configured inventory at once, and names outside it are refused at the door."""
    job = [("2", {"job_id": "2", "event": "start", "time": T0 - 600, "nodes": ["n3"], "time_limit_s": 60, "v": 1}),
           ("2", {"job_id": "2", "event": "end", "time": T0 - 500, "nodes": ["n3"], "v": 1})]
    first = [("n3", {"node": "n3", "first": T0 - 3600, "v": 1})]

    def spare(name, nodes="", jobs=()):
        app, box = make_app(tmp_path / name, {"jobs", "decide"}, nodes=nodes)
        asyncio.run(feed(app, "cluster", first + [("cflood1", {"node": "cflood1", "first": T0 - 3600, "v": 1})]))
        asyncio.run(feed(app, "jobs", list(jobs) + RUNNING))
        asyncio.run(feed(app, "decide", [("n8", WARN)]))
        [action] = [v for topic, _, v in box if topic.endswith("actions")]
        return action["reason"]["inputs"]["spare_nodes"], [(d["error_kind"], json.loads(d["payload"])["node"])
                                                          for topic, _, d in box if topic.endswith("dlq")]

    assert spare("unknown") == (0, [])  # n3 and cflood1 wait: named by no job record, no inventory
    assert spare("job", jobs=job) == (1, [])  # job 2 ran on n3 and ended: n3 is idle, a spare
    assert spare("configured", nodes="n[1-8]") == (1, [("unknown_node", "cflood1")])


def test_invented_node_names_on_samples_ipmi_do_not_lock_out_a_node_a_job_record_names(tmp_path):
    """Issue 58 item 2, the default configuration (no door.nodes): 4,100 samples with invented node names on
    samples.ipmi filled the 4,096-node inventory, and every sample of a real node not seen yet was dead-lettered
    unknown_node.  Now the invented names fill only the quarantine; n8, named by a job record, is predicted.  n9,
    which no job record names, still meets the full quarantine: refused, with a reason that says what to do."""
    app, box = make_app(tmp_path, {"jobs", "windows"}, load_predictor(baseline_model(tmp_path / "m")))
    asyncio.run(feed(app, "node-windows", [sample(f"fake{i:05d}", T0 - 600) for i in range(4_100)]))
    asyncio.run(feed(app, "jobs", RUNNING))  # job 1 runs on n8
    asyncio.run(feed(app, "node-windows", [sample(n, T0 + 15 * k) for k in range(30) for n in ("n8", "n9")]))
    dead = [v for topic, _, v in box if topic.endswith("dlq")]
    refused = [json.loads(d["payload"])["node"] for d in dead]
    assert {d["error_kind"] for d in dead} == {"unknown_node"}
    assert refused == [f"fake{i:05d}" for i in range(4_096, 4_100)] + ["n9"] * 30
    assert "door.nodes" in dead[-1]["reason"] and "job record" in dead[-1]["reason"]
    preds = [v for topic, _, v in box if topic.endswith("predictions.node") and v["node"] in ("n8", "n9")]
    assert preds and {p["node"] for p in preds} == {"n8"}
    inventory = app.hpc.plumbing.inventory
    assert inventory.named == {"n8"} and len(inventory.quarantined) == 4_096


def test_a_site_without_job_records_gets_predictions_for_every_node_up_to_the_quarantine_bound(tmp_path):
    """Sample-only names are still processed (quarantined, not refused) while the quarantine has room."""
    app, box = make_app(tmp_path, {"windows"}, load_predictor(baseline_model(tmp_path / "m")), max_nodes=2)
    asyncio.run(feed(app, "node-windows", [sample(n, T0 + 15 * k) for k in range(30) for n in ("n1", "n2", "n3")]))
    preds = {v["node"] for topic, _, v in box if topic.endswith("predictions.node")}
    dead = [(d["error_kind"], json.loads(d["payload"])["node"]) for topic, _, d in box if topic.endswith("dlq")]
    assert preds == {"n1", "n2"} and dead == [("unknown_node", "n3")] * 30


def test_checkpoint_plans_count_the_configured_machine_not_the_nodes_seen_so_far(tmp_path):
    """With a hostlist the plan's machine size (Eq. 3.14's N) does not depend on how much telemetry was read."""
    start = {"job_id": "7", "event": "start", "time": T0, "nodes": ["n3"], "num_nodes": 1, "time_limit_s": 86400,
             "v": 1}
    plans = {}
    for nodes in ("n[1-64]", ""):
        app, box = make_app(tmp_path / (nodes or "none"), {"jobs"}, nodes=nodes, plan=True)
        asyncio.run(feed(app, "jobs", [("7", start)]))
        [plans[nodes]] = [v for topic, _, v in box if topic.endswith("plans")]
    s = Settings()
    expected = plan_for(s)({**start}, 64)
    assert plans["n[1-64]"]["job_mtbf_h"] == expected["job_mtbf_h"]
    # no hostlist, no node seen yet: the job's own node is the machine
    assert plans[""]["job_mtbf_h"] == plan_for(s)({**start}, 1)["job_mtbf_h"] != expected["job_mtbf_h"]


def test_io_windows_close_by_event_time_and_late_samples_are_dead_lettered(tmp_path):
    app, box = make_app(tmp_path, {"io"})
    io = [("n1", {"node": "n1", "time": T0 + k, "source": "ldms:lustre_client", "v": 1,
                  "values": {"io_read_bytes": 1e9, "io_write_bytes": 2e9}}) for k in range(0, 130)]
    io.append(("n1", {**io[0][1], "time": T0 + 3}))  # its window was published already
    asyncio.run(feed(app, "io-windows", io))
    verdicts = [v for topic, _, v in box if topic.endswith("io.degradation")]
    dead = [v for topic, _, v in box if topic.endswith("dlq")]
    ends = [v["window_end"] for v in verdicts]
    assert ends and all(e % 60 == 0 and e <= T0 + 125 for e in ends) and ends == sorted(ends)
    assert all(v["features"]["read_mean"] == 1e9 for v in verdicts if v["window_start"] >= T0)
    assert [d["error_kind"] for d in dead] == ["late"]


def test_windows_resume_from_their_changelog_deltas_as_if_never_stopped(tmp_path, monkeypatch):
    """A worker restarted from the node-grids table (per-node snapshots + per-partition batch deltas) predicts
    what one uninterrupted worker does; old batches are deleted in `tests/test_partition_delta_log.py`."""
    from hpcguard.streams import delta_log

    monkeypatch.setattr(delta_log, "PARTITION_SNAPSHOT_PERIOD", 4)
    model = load_predictor(baseline_model(tmp_path / "m"))
    recs = [sample(n, T0 + 15 * k + (3 if n == "n2" else 0), fan_rpm=5000 + 40 * k) for k in range(40)
            for n in ("n1", "n2")]

    def predictions(box):
        return sorted((v["node"], v["time"], v["warn"], v["failure_probability"]) for t, _, v in box
                      if t.endswith("predictions.node"))

    whole, box = make_app(tmp_path / "a", {"windows"}, model)
    asyncio.run(feed(whole, "node-windows", recs))
    expected = predictions(box)

    async def in_batches(app, part, first_offset=0):  # several batches: several deltas and snapshots per node
        async with agent(app, "node-windows").test_context() as a:
            a.sent_offset = first_offset  # a restart reads on from the committed offset
            for i, (key, value) in enumerate(part):
                await a.put(json.dumps(value).encode(), key=key.encode())
                if i % 7 == 6:
                    await asyncio.sleep(0.25)  # longer than the agent's batch window
            await asyncio.sleep(0.25)

    first, box1 = make_app(tmp_path / "b", {"windows"}, model)
    asyncio.run(in_batches(first, recs[:50]))
    table = dict(first.hpc.tables.grids.data)
    batches = sorted(int(k.split("@")[1].split(":")[0]) for k in table if k.startswith("~grids~0@"))
    assert {"n1", "n2"} <= set(table) and all("batch" in table[n] for n in ("n1", "n2"))  # snapshots
    assert batches and batches[0] > 1  # the batches both snapshots absorbed are gone
    second, box2 = make_app(tmp_path / "c", {"windows"}, model)
    second.hpc.tables.grids.data.update(table)  # what a restart recovers from the changelog
    asyncio.run(in_batches(second, recs[50:], first_offset=50))
    assert predictions(box1 + box2) == expected and len(expected) > 40


def test_faust_consumers_ask_the_broker_for_the_configured_fetch_wait(tmp_path):
    """Faust hard-codes a 1.5 s fetch wait, which tansu spends in full on every idle fetch; the worker's
    consumers use ``kafka.fetch_max_wait_ms``."""
    s = Settings()
    s.kafka.fetch_max_wait_ms = 37
    pipe = Pipeline(settings=s, topics=TopicNames.from_settings(s.topics), predictor=None, outbox=[],
                    roles=frozenset({"jobs"}))
    app = create_app(pipe)

    async def worker_consumer():  # aiokafka consumers are made inside the event loop
        return app.consumer._thread._create_worker_consumer(app.transport)

    assert asyncio.run(worker_consumer())._fetch_max_wait_ms == 37
    # tansu lists changelog ends short of the last record batch: Faust's recovery check would take the
    # offsets it read itself for "persisted beyond the end" and crash a second rebalance (seen in CI)
    assert app.conf.recovery_consistency_check is False


def test_a_poll_delivered_after_faust_stops_fetching_never_fills_an_agent_buffer(tmp_path):
    """Faust stops fetching a partition once its agent's buffer reaches the pressure-high mark, then delivers the
    rest of the poll it holds; delivering into a full buffer blocks the one consumer for every topic (seen: IO
    windows waiting for probes that could not arrive, the worker exiting as stalled)."""
    app, _ = make_app(tmp_path, {"io"})
    queue = agent(app, "io-windows").channel.queue
    paused = []
    while not paused:  # the agent is busy: records pile up until faust pauses the partition
        queue.put_nowait_enhanced(object(), on_pressure_high=lambda: paused.append(queue.qsize()),
                                  on_pressure_drop=lambda: None)
    for _ in range(app.conf.broker_max_poll_records - 1):  # the rest of that poll is delivered
        assert not queue.full()
        queue.put_nowait(object())


def test_a_node_fail_job_end_labels_its_nodes_for_the_stream(tmp_path):
    """Slurm's word on hpcguard.labels: a job that ended NODE_FAIL names its nodes (the allocation shares
    the evidence); a job that completed names none."""
    app, box = make_app(tmp_path, {"jobs"})
    ends = [(j, {"job_id": j, "event": "end", "time": T0 + 600, "nodes": nodes, "num_nodes": len(nodes),
                 "state": state, "v": 1}) for j, nodes, state in (("7", ["n1", "n2"], "NODE_FAIL"),
                                                                     ("8", ["n3"], "COMPLETED"))]
    asyncio.run(feed(app, "jobs", ends))
    labels = [v for topic, _, v in box if topic.endswith(".labels")]
    assert [(x["node"], x["time"], x["source"], x["confidence"], x["label_id"]) for x in labels] == [
        ("n1", T0 + 600, "node_fail", 0.4, "node_fail:7:n1"), ("n2", T0 + 600, "node_fail", 0.4, "node_fail:7:n2")]


def test_slurm_node_events_become_failure_labels_and_name_no_job(tmp_path):
    """sacctmgr's node events on raw.slurm: normalize turns each into a node-state job event keyed by its node;
    the jobs agent labels a node that went down unasked (DOWN*, not responding) and none an administrator took
    down, and sends neither to the nodes' job streams; a bad envelope is dead-lettered with its reason."""
    from hpcguard.connectors.slurm_events import event_envelope, parse_events

    text = ["n1|2023-11-14T22:20:00|Unknown|DOWN*|Not responding|slurm(64030)",
            "n2|2023-11-14T22:25:00|2023-11-14T23:00:00|DOWN|kernel upgrade|root(0)",
            "n3|2023-11-14T22:30:00|Unknown|DRAIN|Kill task failed|slurm(64030)"]
    envs = [(r["node"], event_envelope(r)) for r in parse_events(text, source="events.txt", tz="UTC")]
    bad = ("n4", {**envs[0][1], "node": "n4;rm -rf /"})
    app, box = make_app(tmp_path, {"normalize"})
    asyncio.run(feed(app, "raw.slurm", envs + [bad]))
    jobs = [(k, v) for topic, k, v in box if topic.endswith(".jobs")]
    assert [(k, v["event"], v["nodes"], v["state"]) for k, v in jobs] == [
        ("n1", "node-state", ["n1"], "DOWN*"), ("n2", "node-state", ["n2"], "DOWN"), ("n3", "node-state", ["n3"], "DRAIN")]
    assert [d["error_kind"] for topic, _, d in box if topic.endswith("dlq")] == ["bad_id"]
    app, box = make_app(tmp_path / "jobs", {"jobs"})
    asyncio.run(feed(app, "jobs", [(k, {k2: v2 for k2, v2 in v.items() if v2 is not None}) for k, v in jobs]))
    labels = [v for topic, _, v in box if topic.endswith(".labels")]
    assert [(x["node"], x["time"], x["source"], x["confidence"], x["stopped"]) for x in labels] == [
        ("n1", 1700000400.0, "event", 0.9, True), ("n3", 1700001000.0, "event", 0.45, False)]
    assert not [t for t, _, _ in box if t.endswith("node.jobs")]
    from hpcguard.models.labels import merge_stream_labels
    assert [(f["node"], f["family"]) for f in merge_stream_labels(labels)] == [("n1", "event")]  # a drain alone: no failure


def test_the_budget_score_reuses_each_nodes_previous_vote(tmp_path):
    """With persistence 2 the budget's score is the lower of a step's vote and its previous step's: the windows
    agent keeps each node's previous vote, so the networks read an earlier history only where it has none."""
    from _budget_site import budget_site

    data, model, _ = budget_site(tmp_path / "site", nodes=2, hours=0.5)
    predictor = load_predictor(model)
    ens = predictor.ensemble
    assert ens.persistence == 2
    app, box = make_app(tmp_path, {"windows"}, predictor)
    inferred = []
    features = ens._features

    def counting(w, back):
        if back:
            inferred.append(len(w))
        return features(w, back)

    ens._features = counting
    recs = [sample(n, T0 + 15 * k + 1) for k in range(60) for n in ("n1", "n2")]
    asyncio.run(feed(app, "node-windows", recs))
    preds = [v for topic, _, v in box if topic.endswith("predictions.node")]
    scored = [p for p in preds if p["detail"]["budget"]["score"] is not None]
    assert len(scored) > 40
    assert sum(inferred) <= 2 * len(set(p["node"] for p in preds)) < len(scored)  # one per node's first steps
