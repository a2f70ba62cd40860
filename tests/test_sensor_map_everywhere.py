"""A site's sensor mapping reaches every command: the offline loader follows
``worker.sensor_map`` as the worker does, the demo's baseline is trained through it, and
``hpcguard demo --sensor-map`` refuses a file it cannot read before starting anything."""
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.connectors.recorded import load_sensor_grid
from hpcguard.models.features import CANONICAL_SENSORS
from hpcguard.settings import Settings
from hpcguard.simulators.demo_run import train_baseline_model
from hpcguard.simulators.telemetry import simulate_telemetry

# the site reads its CPU temperature from the inlet sensor (a deliberately different source)
SITE = '[ipmi.cpu_temp]\nnames = ["Inlet Temp"]\npatterns = []\nunits = ["C"]\nreduce = "first"\n'


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    d = tmp_path_factory.mktemp("rec")
    simulate_telemetry(str(d / "data"), nodes=3, hours=1.0, seed=5)
    (d / "site.toml").write_text(SITE)
    return d


def test_offline_loader_follows_the_worker_setting(recorded):
    default = load_sensor_grid(recorded / "data", settings=Settings())
    site = load_sensor_grid(recorded / "data", settings=Settings().with_overrides(
        worker={"sensor_map": str(recorded / "site.toml")}))
    cpu = CANONICAL_SENSORS.index("cpu_temp")
    assert np.nanmean(site.values[..., cpu]) < np.nanmean(default.values[..., cpu]) - 5  # inlet is cooler
    others = [i for i in range(default.values.shape[-1]) if i != cpu]
    np.testing.assert_array_equal(site.values[..., others], default.values[..., others])


def test_demo_baseline_is_trained_through_the_site_mapping(recorded, tmp_path):
    plain = train_baseline_model([str(recorded / "data")], str(tmp_path / "plain"))
    site = train_baseline_model([str(recorded / "data")], str(tmp_path / "site"),
                                sensor_map=str(recorded / "site.toml"))
    a = json.loads((tmp_path / "plain" / "baseline.json").read_text())
    b = json.loads((tmp_path / "site" / "baseline.json").read_text())
    assert plain["windows"] == site["windows"] and a != b


def test_demo_refuses_an_unreadable_sensor_map(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[ipmi.cpu_temp\n")
    for path in (bad, tmp_path / "missing.toml"):
        r = CliRunner().invoke(app, ["demo", "--sensor-map", str(path), "--workdir", str(tmp_path / "w")])
        assert r.exit_code != 0 and "sensor map" in r.output
        assert not (tmp_path / "w").exists()  # nothing simulated, no broker started
