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
