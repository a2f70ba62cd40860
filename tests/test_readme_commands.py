"""The README's "Run it at your site" commands, as written there, run on a tiny simulated site.

Each command is read from the README, its placeholders (HISTORY, SITE.toml, MODEL, TEST, LATER,
MODEL2, B) filled in, and run through the CLI; only options that make the tiny history cheap
(no simulated prior, one split, few calibration events) are appended. A README edit that breaks a
command, or a command whose options change under it, fails here (issue 60 item 7). The quick
start's `hpcguard demo` runs in tests/test_cli_demo.py.
"""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpcguard.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"
# appended to the README's own options: what makes a 8-node × 3 h history cheap to train on
CHEAP = {"train failure": ["--features", "paper", "--mc-splits", "1", "--calibration-ok", "400"],
         "evaluate failure": ["--max-ok", "500"]}
runner = CliRunner()


def site_commands() -> list[str]:
    """The `hpcguard ...` commands of the README's "Run it at your site" section, in order."""
    text = README.read_text()
    section = text.split("## Run it at your site", 1)[1].split("\n## ", 1)[0]
    return [c for c in re.findall(r"`(hpcguard [^`]+)`", section)]


def test_the_site_path_names_the_commands_in_order():
    names = [" ".join(shlex.split(c)[1:3]) for c in site_commands()]
    assert names[:7] == ["replay HISTORY", "label --sacct", "train failure", "evaluate failure", "evaluate savings",
                         "train threshold", "worker --bootstrap"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from hpcguard.simulators.telemetry import simulate_telemetry

    root = tmp_path_factory.mktemp("site")
    for name, seed in (("history", 1), ("test", 2), ("later", 3)):
        simulate_telemetry(str(root / name), nodes=8, hours=3, seed=seed, mtbf_hours=0.5)
    (root / "site.toml").write_text("")  # the packaged default mapping, as a site file that adds nothing
    return root


def test_each_site_step_runs_as_written(site):
    fill = {"HISTORY": site / "history", "SITE.toml": site / "site.toml", "MODEL2": site / "model2",
            "MODEL": site / "model", "TEST": site / "test", "LATER": site / "later",
            "SACCT": site / "history" / "slurm" / "sacct.txt",
            "HISTORY/failures.csv": site / "history" / "failures.csv"}
    ran = []
    for command in site_commands():
        argv = [str(fill.get(a, a)) for a in shlex.split(command)[1:]]
        if argv[0] == "worker":
            # a long-running service: its options must parse (the worker itself runs in the pipeline tests)
            r = runner.invoke(app, [a if a != "B" else "127.0.0.1:1" for a in argv] + ["--help"])
            assert r.exit_code == 0 and "--bootstrap" in r.output, r.output
            continue
        key = " ".join(argv[:2])
        r = runner.invoke(app, argv + CHEAP.get(key, []) + (["--json"] if key != "train threshold" else []))
        assert r.exit_code == 0, f"{command}\n{r.output[-3000:]}"
        ran.append(key)
    assert ran == ["replay " + str(site / "history"), "label --sacct", "train failure", "evaluate failure",
                   "evaluate savings", "train threshold"]
    assert (site / "model" / "manifest.json").is_file() and (site / "model2" / "manifest.json").is_file()
    assert json.loads((site / "model2" / "manifest.json").read_text())["version"] != \
        json.loads((site / "model" / "manifest.json").read_text())["version"]
