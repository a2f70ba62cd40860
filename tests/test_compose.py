"""compose/: the production stack's docker-compose.yml, topic script, Dockerfile, Prometheus config."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from hpcguard.settings import Settings
from hpcguard.streams.topics import CANONICAL

COMPOSE = Path(__file__).resolve().parents[1] / "compose"
FILE = COMPOSE / "docker-compose.yml"
VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def _stack() -> dict:
    return yaml.safe_load(FILE.read_text())


def _interpolate(value: str) -> str:
    """Compose-style ${VAR:-default} with an empty environment."""
    return VAR.sub(lambda m: m.group(2) or "", str(value))


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    return {k: _interpolate(v) for k, v in env.items()}


def test_services_and_images():
    services = _stack()["services"]
    assert {"kafka", "create-topics", "influxdb", "prometheus", "grafana", "worker", "replay"} <= set(services)
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["influxdb"]["image"].startswith("influxdb:2.")
    assert services["grafana"]["image"].startswith("grafana/grafana:")
    for name, svc in services.items():
        image = svc["image"]
        if "HPCGUARD_VERSION" not in image:  # third-party images are pinned
            assert ":" in image and not image.endswith(":latest"), f"{name}: pin the image tag ({image!r})"
        for dep in svc.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown service {dep}"
    assert services["replay"]["profiles"] == ["replay"] and "profiles" not in services["worker"]


def test_kafka_runs_in_kraft_mode():
    env = _env(_stack()["services"]["kafka"])
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert not any("ZOOKEEPER" in k for k in env)
    voters = env["KAFKA_CONTROLLER_QUORUM_VOTERS"]
    assert voters.split("@")[0] == env["KAFKA_NODE_ID"] and "CONTROLLER" in env["KAFKA_LISTENERS"]
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert len(env["CLUSTER_ID"]) == 22  # base64 of a 16-byte UUID


def test_hpcguard_environment_is_valid_settings():
    services = _stack()["services"]
    for name in ("worker", "replay"):
        env = _env(services[name])
        hpcg = {k: v for k, v in env.items() if k.startswith("HPCGUARD_")}
        assert hpcg, name
        settings = Settings.load(env=hpcg)  # unknown sections/keys or bad types raise
        assert settings.kafka.bootstrap == "kafka:9092"
        assert settings.adapter.kind == "dry-run"  # no scheduler is touched by default
        assert settings.influx.url == "http://influxdb:8086" and settings.influx.version == 2
        assert settings.influx.token  # and the same token InfluxDB is set up with:
        assert settings.influx.token == _env(services["influxdb"])["DOCKER_INFLUXDB_INIT_ADMIN_TOKEN"]
        assert settings.influx.bucket == _env(services["influxdb"])["DOCKER_INFLUXDB_INIT_BUCKET"]
        assert settings.influx.org == _env(services["influxdb"])["DOCKER_INFLUXDB_INIT_ORG"]
    assert _env(services["grafana"])["INFLUX_TOKEN"] == Settings.load(
        env={k: v for k, v in _env(services["worker"]).items() if k.startswith("HPCGUARD_")}).influx.token


def test_workers_scale_by_partitions():
    services = _stack()["services"]
    worker = services["worker"]
    assert worker["command"][:2] == ["hpcguard", "worker"]
    cmd = worker["command"]
    assert cmd[cmd.index("--bootstrap") + 1] == "kafka:9092"
    port = cmd[cmd.index("--metrics-port") + 1]
    replicas = int(_interpolate(worker["deploy"]["replicas"]))
    partitions = int(_env(worker)["HPCGUARD_TOPICS__PARTITIONS"])
    assert 1 <= replicas <= partitions
    assert int(_env(services["create-topics"])["PARTITIONS"]) == partitions
    assert worker["depends_on"]["create-topics"]["condition"] == "service_completed_successfully"
    prom = yaml.safe_load((COMPOSE / "prometheus.yml").read_text())
    sd = prom["scrape_configs"][0]["dns_sd_configs"][0]
    assert sd["names"] == ["worker"] and str(sd["port"]) == port


def test_topic_script_creates_every_canonical_topic():
    script = (COMPOSE / "create-topics.sh").read_text()
    suffixes = set(re.search(r'^SUFFIXES="([^"]*)"', script, re.M).group(1).split())
    assert suffixes == set(CANONICAL.values())
    ldms = set(_env(_stack()["services"]["create-topics"])["LDMS_TOPICS"].split())
    defaults = Settings().topics
    assert ldms == {defaults.ldms(s) for s in defaults.ldms_schemas}
    assert "--partitions" in script and "--if-not-exists" in script


def test_referenced_files_exist():
    stack = _stack()
    for name, svc in stack["services"].items():
        for vol in svc.get("volumes", []):
            source = vol.split(":")[0]
            if source.startswith("."):
                assert (COMPOSE / source).exists(), f"{name}: {source} missing"
            else:
                assert source in stack["volumes"], f"{name}: undeclared volume {source}"
        build = svc.get("build")
        if build:
            context = (COMPOSE / build["context"]).resolve()
            dockerfile = context / build["dockerfile"]
            assert dockerfile.is_file(), dockerfile
            for line in dockerfile.read_text().splitlines():
                if line.startswith("COPY "):
                    for src in line.split()[1:-1]:
                        assert (context / src).exists(), f"Dockerfile copies missing {src}"
    assert (COMPOSE / "grafana" / "provisioning" / "datasources").is_dir()


def test_dockerfile_installs_cpu_torch_and_the_package():
    text = (COMPOSE / "Dockerfile").read_text()
    assert "torch==2.13.0" in text and "download.pytorch.org/whl/cpu" in text
    assert re.search(r"pip install .*\s\.(\s|$)", text)
    pinned = re.search(r'"torch==([\d.]+)"', (COMPOSE.parent / "pyproject.toml").read_text())
    assert pinned and f"torch=={pinned.group(1)}" in text


def _docker_compose_ready() -> str | None:
    if not shutil.which("docker"):
        return "no docker client"
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
        return "docker client has no compose plugin"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "no Docker engine answers"
    return None


def test_docker_compose_config_accepts_the_file():
    reason = _docker_compose_ready()
    if reason:
        pytest.skip(f"`docker compose config` not run: {reason}")
    result = subprocess.run(["docker", "compose", "-f", str(FILE), "--profile", "replay", "config", "--quiet"],
                            capture_output=True, text=True, cwd=COMPOSE)
    assert result.returncode == 0, result.stderr


def test_readme_documents_every_compose_variable():
    variables = set(VAR.findall(FILE.read_text()))
    readme = (COMPOSE / "README.md").read_text()
    missing = {name for name, _ in variables if f"`{name}`" not in readme}
    assert not missing, f"compose/README.md does not document {sorted(missing)}"


def test_topic_script_passes_partitions_to_kafka_topics(tmp_path):
    calls = tmp_path / "calls.txt"
    stub = tmp_path / "kafka-topics.sh"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    stub.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "KAFKA_TOPICS": str(stub), "BOOTSTRAP": "k:9092", "PREFIX": "site1",
           "PARTITIONS": "6", "REPLICATION": "3", "LDMS_TOPICS": "ldms.meminfo ldms.procstat"}
    subprocess.run(["bash", str(COMPOSE / "create-topics.sh")], env=env, check=True, capture_output=True)
    created, configs = {}, {}
    for line in calls.read_text().splitlines():
        argv = line.split()
        if "--create" in argv:
            assert argv[argv.index("--bootstrap-server") + 1] == "k:9092"
            topic = argv[argv.index("--topic") + 1]
            created[topic] = (argv[argv.index("--partitions") + 1], argv[argv.index("--replication-factor") + 1])
            configs[topic] = [argv[i + 1] for i, a in enumerate(argv) if a == "--config"]
    expected = {f"site1.{s}" for s in CANONICAL.values()} | {"ldms.meminfo", "ldms.procstat"}
    assert set(created) == expected
    assert set(created.values()) == {("6", "3")}
    # the telemetry expires after 48 h by default; what the operators read later keeps the broker's retention
    telemetry = {"ldms.meminfo", "ldms.procstat", "site1.raw.ipmi", "site1.samples.ipmi", "site1.samples.io",
                 "site1.samples.os"}
    assert {t for t, c in configs.items() if c} == telemetry
    assert {c for t in telemetry for c in configs[t]} == {f"retention.ms={48 * 3600 * 1000}"}


def test_topic_script_retention_can_be_the_brokers_and_refuses_nonsense(tmp_path):
    calls = tmp_path / "calls.txt"
    stub = tmp_path / "kafka-topics.sh"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    stub.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "KAFKA_TOPICS": str(stub), "STREAM_RETENTION_HOURS": "0"}
    subprocess.run(["bash", str(COMPOSE / "create-topics.sh")], env=env, check=True, capture_output=True)
    assert "--config" not in calls.read_text()
    bad = subprocess.run(["bash", str(COMPOSE / "create-topics.sh")], env={**env, "STREAM_RETENTION_HOURS": "2d"},
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "whole hours" in bad.stderr
