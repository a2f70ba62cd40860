"""Worker start-up checks: the model's sensor-mapping digest against the worker's."""
from types import SimpleNamespace

from hpcguard.connectors.mapping import SensorMapping
from hpcguard.settings import Settings
from hpcguard.streams.app import Pipeline, create_app
from hpcguard.streams.topics import TopicNames
from hpcguard.streams import metrics
from hpcguard.streams.worker import check_mapping


def gauge(worker_digest, model_digest):
    return metrics.REGISTRY.get_sample_value("hpcguard_sensor_map_mismatch", {
        "worker_digest": worker_digest[:12], "model_digest": model_digest[:12]})


def test_a_model_trained_with_another_mapping_is_flagged_in_metrics(caplog):
    mapping = SensorMapping.load(None)
    other = SimpleNamespace(version="m1", metadata={"sensor_map_digest": "f" * 64})
    info = check_mapping(mapping, other)
    assert info["sensor_map_mismatch"] and gauge(mapping.digest, "f" * 64) == 1.0
    assert "differs from the one model m1 was trained with" in caplog.text
    same = SimpleNamespace(version="m2", metadata={"metadata": {"sensor_map_sha256": mapping.digest}})
    assert not check_mapping(mapping, same)["sensor_map_mismatch"] and gauge(mapping.digest, mapping.digest) == 0.0
    assert check_mapping(mapping, SimpleNamespace(metadata={}))["model_sensor_map_digest"] is None


def test_the_ldms_batch_consumer_is_not_ready_until_it_reads(tmp_path):
    """Its gauge exists (0) from app creation: a replay waiting for ready workers waits for it too, instead of
    starting while it still joins its group (the LDMS rows of the first seconds then waited ~5 s)."""
    s = Settings().with_overrides(worker=dict(app_id="startup-check", data_dir=str(tmp_path)))
    create_app(Pipeline(settings=s, topics=TopicNames.from_settings(s.topics), roles=frozenset({"normalize"})))
    assert metrics.REGISTRY.get_sample_value("hpcguard_consumer_ready", {"consumer": "startup-check-ldms"}) == 0.0


def test_a_worker_without_a_node_inventory_says_so_loudly_at_start_and_in_metrics(tmp_path, caplog):
    """Issue 58 item 2: with no door.nodes a worker learns nodes from Slurm job records and quarantines names seen
    only on sample topics; it says so in one WARNING line at start and in /metrics."""
    import logging

    def start(roles, nodes=""):
        s = Settings().with_overrides(worker=dict(app_id="inventory-check", data_dir=str(tmp_path)),
                                      door=dict(nodes=nodes))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="hpcguard.worker"):
            app = create_app(Pipeline(settings=s, topics=TopicNames.from_settings(s.topics), roles=frozenset(roles),
                                      outbox=[]))
        lines = [r for r in caplog.records if "NO NODE INVENTORY IS CONFIGURED" in r.getMessage()]
        return app, lines, metrics.REGISTRY.get_sample_value("hpcguard_inventory_configured")

    app, lines, configured = start({"windows", "jobs"})
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING and configured == 0.0
    text = lines[0].getMessage()
    assert "door.nodes" in text and "quarantined" in text and "4096" in text and "\n" not in text
    app.hpc.plumbing.inventory.admit("n1")
    app.hpc.plumbing.inventory.name(["n2"])
    assert metrics.REGISTRY.get_sample_value("hpcguard_inventory_quarantined") == 1.0
    assert metrics.REGISTRY.get_sample_value("hpcguard_inventory_slurm_named") == 1.0
    _, lines, configured = start({"windows"}, nodes="n[1-4]")
    assert lines == [] and configured == 1.0
    _, lines, _ = start({"adapter"})  # admits no node: nothing to warn about
    assert lines == []


def test_standby_replicas_reach_faust(tmp_path):
    """worker.standby_replicas sets Faust's standby copies of other workers' tables (issue 61: with two workers
    each held the whole site's state; 0 halves what a worker holds of the other's)."""
    for n in (0, 1):
        s = Settings().with_overrides(worker=dict(app_id=f"standby-{n}", data_dir=str(tmp_path), standby_replicas=n))
        app = create_app(Pipeline(settings=s, topics=TopicNames.from_settings(s.topics), roles=frozenset({"windows"}),
                                  outbox=[]))
        assert app.conf.table_standby_replicas == n
