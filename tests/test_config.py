"""`hpcguard config show` and the example configuration compose/hpcguard.toml."""
from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from hpcguard.settings import SECRET_KEYS, Settings
from hpcguard.cli import app

EXAMPLE = Path(__file__).resolve().parents[1] / "compose" / "hpcguard.toml"
runner = CliRunner()


def _show(*args: str, env: dict | None = None):
    return runner.invoke(app, ["config", "show", *args], env={"HPCGUARD_CONFIG": "", **(env or {})})


def test_example_documents_every_setting():
    data = tomllib.loads(EXAMPLE.read_text())
    defaults = Settings()
    assert set(data) == {f.name for f in dataclasses.fields(defaults)}
    for section, values in data.items():
        assert set(values) == {f.name for f in dataclasses.fields(getattr(defaults, section))}, section
    loaded = Settings.load(EXAMPLE, env={})
    assert loaded.kafka.bootstrap == "kafka:9092"


def test_show_json_masks_secrets_and_applies_env(tmp_path):
    cfg = tmp_path / "site.toml"
    cfg.write_text('[kafka]\nsasl_password = "file-secret"\n[influx]\nurl = "http://influx:8086"\n')
    result = _show("--config", str(cfg), "--json",
                   env={"HPCGUARD_INFLUX__TOKEN": "env-token", "HPCGUARD_TOPICS__PREFIX": "site1"})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["influx"]["url"] == "http://influx:8086" and data["topics"]["prefix"] == "site1"
    assert data["influx"]["token"] == "***" and data["kafka"]["sasl_password"] == "***"
    assert "file-secret" not in result.stdout and "env-token" not in result.stdout
    assert data["kafka"]["ssl_password"] == ""  # unset secrets stay visibly empty
    assert set(SECRET_KEYS) <= {k for section in data.values() for k in section}


def test_show_toml_round_trips(tmp_path):
    result = _show("--config", str(EXAMPLE))
    assert result.exit_code == 0, result.output
    saved = tmp_path / "effective.toml"
    saved.write_text(result.stdout)
    assert Settings.load(saved, env={}).as_dict() == Settings.load(EXAMPLE, env={}).as_dict()


def test_show_reports_bad_configuration_clearly(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[influx]\nurll = 1\n")
    result = _show("--config", str(bad))
    assert result.exit_code == 2 and "unknown key influx.urll" in result.output
    result = _show("--config", str(tmp_path / "missing.toml"))
    assert result.exit_code == 2 and "not found" in result.output
    broken = tmp_path / "broken.toml"
    broken.write_text("[influx\n")
    result = _show("--config", str(broken))
    assert result.exit_code == 2 and "cannot read configuration" in result.output
    result = _show(env={"HPCGUARD_INFLUX__BATCH_SIZE": "many"})
    assert result.exit_code == 2 and "batch_size expects int" in result.output
