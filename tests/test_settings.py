import pytest

from hpcguard.settings import Settings
from hpcguard.streams.topics import TopicNames


def test_precedence_file_then_env(tmp_path):
    cfg = tmp_path / "h.toml"
    cfg.write_text('[kafka]\nbootstrap = "k1:9092"\nsasl_password = "s3cret"\n[topics]\nprefix = "siteA"\n')
    s = Settings.load(cfg, env={"HPCGUARD_TOPICS__PREFIX": "siteB", "HPCGUARD_WORKER__GRID_S": "10"})
    assert s.kafka.bootstrap == "k1:9092"
    assert s.topics.prefix == "siteB" and s.worker.grid_s == 10.0
    assert s.as_dict()["kafka"]["sasl_password"] == "***"
    assert TopicNames.from_settings(s.topics).actions == "siteB.actions"


def test_unknown_keys_and_bad_types_are_clear_errors(tmp_path):
    cfg = tmp_path / "h.toml"
    cfg.write_text("[kafka]\nbootstrapp = 1\n")
    with pytest.raises(ValueError, match="unknown key kafka.bootstrapp"):
        Settings.load(cfg, env={})
    with pytest.raises(ValueError, match="grid_s expects float"):
        Settings.load(env={"HPCGUARD_WORKER__GRID_S": "fast"})
    with pytest.raises(FileNotFoundError):
        Settings.load(tmp_path / "missing.toml", env={})


def test_overrides_ignore_none():
    s = Settings().with_overrides(kafka={"bootstrap": None, "security_protocol": "SASL_SSL"})
    assert s.kafka.bootstrap == "127.0.0.1:9092" and s.kafka.security_protocol == "SASL_SSL"
    assert Settings().kafka.security_protocol == "PLAINTEXT"  # the original is untouched
