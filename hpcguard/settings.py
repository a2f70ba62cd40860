"""One settings object for every hpcguard command and worker.

Precedence (lowest → highest): built-in defaults, a TOML file (``--config`` or
``HPCGUARD_CONFIG``), ``HPCGUARD_<SECTION>__<KEY>`` environment variables, then
command-line options.  ``hpcguard config show`` prints the effective result with
secrets masked.

Example
-------
>>> s = Settings()
>>> s.topics.name("actions")
'hpcguard.actions'
>>> Settings.load(env={"HPCGUARD_TOPICS__PREFIX": "site1"}).topics.name("dlq")
'site1.dlq'
"""
from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

SECRET_KEYS = {"sasl_password", "token", "password", "ssl_password"}


@dataclass
class KafkaSettings:
    """Kafka connection; the same options reach kafka-python, aiokafka and Faust."""

    bootstrap: str = "127.0.0.1:9092"
    security_protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl_mechanism: str = ""  # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl_username: str = ""
    sasl_password: str = ""
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    ssl_password: str = ""
    # how long the broker may hold a fetch that found nothing; Faust hard-codes 1,500 ms, and tansu holds
    # an empty fetch that long even when records arrive meanwhile, so each hop waited up to that long
    fetch_max_wait_ms: int = 100
    # how long ``hpcguard replay``'s producer waits to fill a batch; on S3-backed tansu every batch is one
    # object and each fetch lists them all, so a paced replay of many nodes wants fewer, larger batches
    replay_linger_ms: int = 20


@dataclass
class TopicSettings:
    """Topic names: ``<prefix>.<suffix>``; LDMS topics keep LDMS's own ``ldms.<schema>``."""

    prefix: str = "hpcguard"
    partitions: int = 1
    replication: int = 1
    ldms_format: str = "ldms.{schema}"
    ldms_schemas: tuple[str, ...] = ("lustre_client", "meminfo", "procstat", "loadavg", "procnetdev", "diskusage")

    def name(self, suffix: str) -> str:
        return f"{self.prefix}.{suffix}" if self.prefix else suffix

    def ldms(self, schema: str) -> str:
        return self.ldms_format.format(schema=schema)


@dataclass
class WorkerSettings:
    """Streaming worker behaviour."""

    app_id: str = "hpcguard"
    data_dir: str = "/tmp/hpcguard-worker"
    web_port: int = 0  # 0 = Faust web server off
    metrics_port: int = 0  # 0 = Prometheus endpoint off
    metrics_addr: str = "127.0.0.1"  # 0.0.0.0 in containers so Prometheus can scrape
    # Faust's standby copies of other workers' tables: 1 keeps a warm copy for a quick take-over, and with two
    # workers each then holds the whole site's state; 0 holds only its own (a take-over reads the changelog)
    standby_replicas: int = 1
    grid_s: float = 15.0  # node sample grid (seed 000: 15 s)
    window_minutes: float = 4.0  # feature window (seed 000: 4 min)
    io_window_s: float = 60.0  # CanarIO observation window (seed 004: 1 min)
    lateness_s: float = 30.0  # how long a grid step stays open for late samples
    # a jittered poll that finds its step taken moves to the next step if that starts at most this much later
    # (models.grid.poll_steps; below grid_s / 2); online and offline grids use the same value
    poll_tolerance_s: float = 3.0
    system: str = "cluster"  # name of the system for system-wide topics
    model_dir: str = ""  # failure-ensemble model directory; empty → baseline detector
    io_initial_bank_h: float = 24.0  # CanarIO: hours of labelled windows before the detector predicts (seed 004)
    io_retrain_minutes: float = 10.0  # CanarIO: retrain the detector every this much stream time (seed 004)
    # CanarIO: the detector keeps the newest this many hours of labelled windows (0 = all).  Its state is one
    # changelog record (~190 KB per day of 1-minute windows): kept whole it would pass Kafka's 1 MB message
    # limit after about five days of service
    io_max_bank_h: float = 72.0
    probe_baseline_runs: int = 100  # CanarIO: expected probe runtime = median of the first N runs (seed 004)
    job_classifier: str = ""  # CanarIO: pre-trained PRIONN job classifier file; empty → learn online from scratch
    idle_s: float = 60.0  # a source (or IO node) silent this many wall seconds stops holding the watermark back
    grid_sources: tuple[str, ...] = ("ipmi", "ldms:meminfo", "ldms:procstat", "ldms:loadavg", "ldms:procnetdev",
                                     "ldms:diskusage")  # sources a node grid waits for from its first record
    jobs_lateness_s: float = 0.0  # how far the job stream's watermark trails its newest event time
    job_wait_s: float = 10.0  # longest wall wait of a decision for the job stream's watermark to pass its sample time
    sensor_map: str = ""  # site sensor mapping (TOML); empty → the packaged default
    # false-alarm budget (issue 56): warning episodes per 100 node-days that were followed by no failure; the
    # LSTM vote's threshold moves at event time to hold it (models.budget_epochs), one controller per input
    # partition; 0 = the model's fixed threshold
    false_alarms: float = 2.0
    budget_warmup_node_days: float = 8.0  # per partition: the model's own threshold until this much is seen
    budget_epoch_minutes: float = 60.0  # the threshold changes only when event time enters a new epoch
    budget_silence_s: float = 300.0  # a node whose predictions stop this long failed (the label a site has)


@dataclass
class AdapterSettings:
    """Scheduler adapter and its safety governor."""

    kind: str = "dry-run"  # dry-run | slurm | command | simulator
    audit_log: str = "hpcguard-actions.jsonl"
    ledger: str = "/var/lib/hpcguard/ledger.sqlite"  # the site's exactly-once ledger (SQLite): absolute, one per site
    governor_config: str = ""  # TOML with the safety governor's limits
    slurm_conf: str = ""  # SLURM_CONF for the Slurm commands (empty: Slurm's default)
    checkpoint_signal: str = "USR1"  # signal the site's checkpoint library traps (SCR, DMTCP...)
    signal_scope: str = "batch"  # batch | full | steps
    migrate_grace_s: float = 30.0  # wait between the checkpoint signal and the requeue
    migrate_hook: str = ""  # site executable for live migration: HOOK JOBID NODE...
    timeout_s: float = 15.0  # limit on every scheduler command
    # command adapter: action kind → argv template, e.g. drain = ["/usr/local/sbin/site-drain", "{nodes}"];
    # placeholders {action_id} {kind} {job_id} {nodes} {reason} {source} {deadline}; KIND = [] leaves a kind unhandled
    commands: dict = field(default_factory=dict)
    # command adapter, after a crash: action kind → verify argv template (same placeholders); exit 0 = the effect is
    # there, 1 = no effect (reconcile runs the action now), 3 = skipped, else unknown; a kind without one stays unknown
    verify: dict = field(default_factory=dict)


@dataclass
class PolicySettings:
    """Site costs and limits of the decision policy (``models.policy``)."""

    node_memory_gb: float = 128.0  # memory per node (a typical cluster; Summit: 512)
    migration_gbs: float = 12.5  # inter-node bandwidth for live migration
    bb_write_gbs: float = 0.0  # burst-buffer write bandwidth per node; 0 = no burst buffer (Summit: 2.1)
    pfs_write_gbs: float = 1.0  # parallel-file-system write bandwidth per node
    checkpoint_fraction: float = 0.5  # checkpoint size / node memory when meminfo says nothing
    break_even: bool = True  # act only when p × node-hours at risk exceeds the action's cost
    uc_ceiling: float = 0.0  # hold back warnings of jobs whose UC(n) exceeds this (0 = off)
    mtbf_h: float = 24.0  # machine MTBF for periodic checkpoint plans at job start
    ckpt_cost_h: float = 0.1  # checkpoint cost for periodic plans
    system_nodes: int = 0  # nodes of the machine for MTBF scaling (0 = nodes seen)
    quiet_minutes: float = 10.0  # a node's warning episode ends after this long without warnings
    hot_spares: str = ""  # hostlist of nodes the batch scheduler never uses (a Slurm reservation): spare for migrations


@dataclass
class InfluxSettings:
    """InfluxDB sink (2.x via influxdb-client, or 1.x HTTP /write)."""

    url: str = ""  # empty → sink off
    version: int = 2
    org: str = ""
    bucket: str = "hpcguard"
    token: str = ""
    database: str = "hpcguard"
    retention_policy: str = ""
    username: str = ""
    password: str = ""
    create_database: bool = True  # 1.x: CREATE DATABASE when /write answers "database not found"
    batch_size: int = 1000  # points per write request
    flush_interval_s: float = 2.0  # background flush period
    buffer_points: int = 100_000  # bound of the in-memory buffer; overflow drops oldest, counted
    timeout_s: float = 10.0  # per-request timeout
    backoff_s: float = 0.5  # first retry delay after a failed write; doubles per failure
    backoff_max_s: float = 30.0  # retry delay cap
    sample_every_s: float = 0.0  # keep one node sample per node and source per N s (0 = all)


@dataclass
class DoorSettings:
    """Checks every record passes before it touches state (``connectors.validation``)."""

    max_bytes: int = 1_048_576  # largest raw record accepted
    max_depth: int = 32  # deepest JSON nesting accepted
    epoch: float = 946_684_800.0  # deployment epoch: earlier times are refused (2000-01-01 UTC)
    max_skew_s: float = 300.0  # how far ahead of the wall clock (or a node's watermark) a time may be
    max_abs_value: float = 1e15  # magnitude bound of metric values and durations
    max_text: int = 256  # longest label (source, model, user, state...)
    max_list: int = 4096  # longest list (nodes, network probabilities)
    nodes: str = ""  # hostlist of the site's nodes (e.g. "n[0001-1024],gpu[01-16]"); empty → node_pattern + max_nodes
    node_pattern: str = ""  # regex node names must match; empty → the adapter's node-name rule
    max_nodes: int = 4096  # no hostlist: bound of sample-only (quarantined) names, and of Slurm-named nodes


@dataclass
class SacctSettings:
    """How the site's sacct dumps are written (``connectors.sacct.SacctDialect``)."""

    timezone: str = "UTC"  # IANA zone of times sacct printed without an offset (its local time)
    delimiter: str = "|"  # sacct --delimiter (-P / -p use "|")
    columns: tuple[str, ...] = ()  # --format column list of --noheader output; empty → the file's header line


@dataclass
class LdmsSettings:
    """Column names of LDMS rows (``connectors.ldms.LdmsColumns``); the first present wins."""

    producer_columns: tuple[str, ...] = ("ProducerName", "producer", "prdcr", "producer_name")
    time_columns: tuple[str, ...] = ("timestamp", "Time", "time")
    component_columns: tuple[str, ...] = ("component_id", "comp_id")
    # procnetdev: interfaces (fnmatch patterns) whose bytes are summed; "lo" never counts.  The
    # default knows the common fabrics: Ethernet (eth*, en*: eno1, ens3, enp65s0), InfiniBand (ib*),
    # Slingshot (hsn*), Omni-Path (opa*, hfi*).  bond* is left out: its members (eth*/en*) already
    # carry its bytes, and a bond and its members are all counted if both match (list the bond
    # alone on bonded nodes).  Coverage reports each interface's share and warns when a left-out
    # one is a node's busiest.
    netdev_interfaces: tuple[str, ...] = ("eth*", "en*", "ib*", "hsn*", "opa*", "hfi*")


@dataclass
class IpmiSettings:
    """How recorded IPMI tool output is cut into polls (``connectors.ipmi``)."""

    # a line that starts a poll and gives its time (one regex group), parsed with time_format
    # (strptime, UTC; "epoch" for seconds): FASRC's "Timestamp: 2025-06-03 00:00:01 UTC" by default
    time_pattern: str = r"Timestamp:\s*(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})\s*(?:UTC|Z)?\s*"
    time_format: str = "%Y-%m-%d %H:%M:%S"
    untimed: str = "reject"  # rows before any poll/timestamp line: reject (dead letter) | mtime (file's mtime)
    default_host: str = ""  # node of Telegraf lines with neither server= nor host= (empty: dead letter)


@dataclass
class LivenessSettings:
    """Stall detection of a worker's consumer (``streams.liveness``)."""

    check_every_s: float = 5.0  # how often progress and end offsets are compared
    stall_after_s: float = 60.0  # no progress for this long while the broker has data → stalled
    max_commit_errors: int = 50  # this many failed offset commits without progress → stalled
    on_stall: str = "exit"  # exit (status 75, for a supervisor to restart) | log
    exit_grace_s: float = 10.0  # time for a clean stop before the process exits anyway


@dataclass
class Settings:
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    topics: TopicSettings = field(default_factory=TopicSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    adapter: AdapterSettings = field(default_factory=AdapterSettings)
    policy: PolicySettings = field(default_factory=PolicySettings)
    influx: InfluxSettings = field(default_factory=InfluxSettings)
    door: DoorSettings = field(default_factory=DoorSettings)
    liveness: LivenessSettings = field(default_factory=LivenessSettings)
    sacct: SacctSettings = field(default_factory=SacctSettings)
    ldms: LdmsSettings = field(default_factory=LdmsSettings)
    ipmi: IpmiSettings = field(default_factory=IpmiSettings)

    @classmethod
    def load(cls, path: str | Path | None = None, env: Mapping[str, str] | None = None) -> "Settings":
        """Defaults ← TOML file ← ``HPCGUARD_SECTION__KEY`` environment variables."""
        env = os.environ if env is None else env
        settings = cls()
        path = path or env.get("HPCGUARD_CONFIG")
        if path:
            p = Path(path)
            if not p.is_file():
                raise FileNotFoundError(f"configuration file not found: {p}")
            with p.open("rb") as fh:
                data = tomllib.load(fh)
            for section, values in data.items():
                settings._set_section(section, values, origin=str(p))
        for key, value in env.items():
            if not key.startswith("HPCGUARD_") or "__" not in key:
                continue
            section, _, name = key[len("HPCGUARD_"):].lower().partition("__")
            settings._set_section(section, {name: value}, origin=key)
        return settings

    def _set_section(self, section: str, values: Mapping[str, Any], origin: str) -> None:
        if section not in {f.name for f in fields(self)}:
            raise ValueError(f"{origin}: unknown configuration section [{section}]")
        target = getattr(self, section)
        known = {f.name: f for f in fields(target)}
        for name, value in values.items():
            if name not in known:
                raise ValueError(f"{origin}: unknown key {section}.{name} (known: {', '.join(sorted(known))})")
            current = getattr(target, name)
            setattr(target, name, _coerce(value, current, f"{section}.{name}", origin))

    def with_overrides(self, **sections: Mapping[str, Any]) -> "Settings":
        """A copy with ``section={key: value}`` overrides; ``None`` values are ignored."""
        new = dataclasses.replace(self, **{f.name: dataclasses.replace(getattr(self, f.name)) for f in fields(self)})
        for section, values in sections.items():
            new._set_section(section, {k: v for k, v in values.items() if v is not None}, origin="command line")
        return new

    def as_dict(self, mask_secrets: bool = True) -> dict[str, dict[str, Any]]:
        out = dataclasses.asdict(self)
        if mask_secrets:
            for section in out.values():
                for k, v in section.items():
                    if k in SECRET_KEYS and v:
                        section[k] = "***"
        return out


def _coerce(value: Any, current: Any, key: str, origin: str) -> Any:
    if not isinstance(value, str):
        if isinstance(current, tuple) and isinstance(value, list):
            return tuple(value)
        return value
    try:
        if isinstance(current, bool):
            if value.lower() in {"1", "true", "yes", "on"}:
                return True
            if value.lower() in {"0", "false", "no", "off"}:
                return False
            raise ValueError(value)
        if isinstance(current, int):
            return int(value)
        if isinstance(current, float):
            return float(value)
        if isinstance(current, tuple):
            return tuple(x.strip() for x in value.split(",") if x.strip())
        if isinstance(current, dict):  # a table given in the environment: JSON
            table = json.loads(value)
            if not isinstance(table, dict):
                raise ValueError(value)
            return table
    except ValueError:
        raise ValueError(f"{origin}: {key} expects {type(current).__name__}, got {value!r}") from None
    return value
