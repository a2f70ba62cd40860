"""normalize: raw LDMS rows, IPMI envelopes and sacct envelopes → canonical records.

Every raw record passes the door (size, depth, types, time bounds, ids) before a
parser sees it; each batch is handled record by record under the plumbing's guard, so
one bad record becomes one dead letter and the rest of the batch goes on.  LDMS rows —
the bulk of the traffic (1 s IO rows) — are read in ``getmany`` batches by
:func:`~hpcguard.streams.plumbing.consume_batches` (consumer group ``<app_id>-ldms``),
outside Faust's per-event machinery, and their samples leave as ``NodeSamples`` batches (one
record per node, or file system, and input batch); IPMI and sacct envelopes are Faust agents.
"""
from __future__ import annotations

from typing import Callable

import faust

from hpcguard.connectors.ipmi import decode_ipmi_envelope
from hpcguard.connectors.ldms import LdmsColumns, LdmsDecoder
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.connectors.sacct import decode_slurm_envelope
from hpcguard.connectors.slurm_events import FORMAT as SLURM_EVENT_FORMAT, decode_event_envelope
from hpcguard.connectors.validation import ValidationError, require_samples
from hpcguard.streams import metrics
from hpcguard.streams.plumbing import Plumbing, consume_batches
from hpcguard.streams.topics import out

BATCH, WITHIN_S = 1000, 0.05
LDMS_BATCH = 5000  # records per getmany: per-batch costs (send, commit) are amortised over many rows
SAMPLES_PER_RECORD = 1000  # a NodeSamples record stays far below the door's 1 MiB and 4,096-item limits


def normalize_ldms_rows(records: list, door: Plumbing, ldms: LdmsDecoder, route: dict) -> None:
    """Raw LDMS rows (``ConsumerRecord``: topic, offset, value, timestamp in ms) → samples via ``door``.

    ``route``: raw topic → (schema, output topic, output key or ``None`` for the node).  The
    samples go out as ``NodeSamples`` batches, one per output key (node or file system) and
    call, in input order, at most :data:`SAMPLES_PER_RECORD` each.
    """
    batches: dict[tuple, list[dict]] = {}
    for rec in records:
        schema, target, io_key = route[rec.topic]
        with door.guard(rec.topic, rec.value, rec.offset):
            sample = ldms.decode(schema, door.check("ldms", door.loads(rec.value)))
            if sample is not None:
                sample["ingest_time"], sample["v"] = rec.timestamp / 1000.0, 1
                batches.setdefault((target, io_key or sample["node"]), []).append(sample)
    for (target, key), samples in batches.items():
        for i in range(0, len(samples), SAMPLES_PER_RECORD):
            door.publish(target, key, {"samples": samples[i:i + SAMPLES_PER_RECORD], "v": 1})


def register(app: faust.App) -> None:
    hpc = app.hpc
    door, names = hpc.plumbing, hpc.names
    mapping = hpc.pipeline.mapping or SensorMapping.load(None)
    ldms = LdmsDecoder(mapping, columns=LdmsColumns.from_settings(hpc.settings))  # [ldms] of --config too

    # IO is keyed by file system: one partition, hence one worker, owns its windows and detector
    route = {name: (schema, names.samples_io, hpc.settings.worker.system) if schema == "lustre_client"
             else (schema, names.samples_os, None)
             for schema, name in zip(hpc.settings.topics.ldms_schemas, names.ldms)}
    # the batch loop's own door: its outbox is sent, and acknowledged, before the batch's offsets are committed
    # (Faust's test context: the pipeline's outbox, and no loop — tests hand records to hpc.normalize_ldms)
    testing = hpc.pipeline.outbox is not None
    batch_door = Plumbing(dlq=names.dlq, limits=door.limits, inventory=door.inventory,
                          outbox=hpc.pipeline.outbox if testing else [])
    hpc.normalize_ldms = lambda records: normalize_ldms_rows(records, batch_door, ldms, route)
    if not testing:
        group = f"{hpc.settings.worker.app_id}-ldms"
        # not ready from the start: the batch consumer joins its group (seconds) after the app started, and a
        # replay that began before it would meet a start-up backlog of LDMS rows
        metrics.CONSUMER_READY.labels(group).set(0)

        @app.task
        async def normalize_ldms() -> None:
            await consume_batches(app, list(route), group, hpc.normalize_ldms, batch_door, max_records=LDMS_BATCH)

    def ipmi_records(raw: bytes, ingested: float | None) -> list[tuple[str, dict]]:
        if raw[:1] == b"{":
            env = door.check("ipmi", door.loads(raw))
        else:  # Telegraf's Kafka output: bare ipmi_sensor line protocol
            if len(raw) > door.limits.max_bytes:
                raise ValidationError("record", f"{len(raw)} bytes exceed the limit of {door.limits.max_bytes}",
                                      "too_large")
            env = {"format": "telegraf-lp", "text": raw.decode("utf-8"), "source": names.raw_ipmi,
                   "default_host": hpc.settings.ipmi.default_host or None}  # lines with no server=/host= tag
        samples = require_samples(decode_ipmi_envelope(env, mapping), "IPMI envelope")
        return [(d["node"], {**d, "ingest_time": ingested, "v": 1}) for d in samples]

    def slurm_records(raw: bytes, ingested: float | None) -> list[tuple[str, dict]]:
        env = door.check("slurm", door.loads(raw))
        if env.get("format") == SLURM_EVENT_FORMAT:  # a node's state change: keyed by its node
            event = decode_event_envelope(env)
            return [(event["nodes"][0], {**event, "v": 1})]
        event = decode_slurm_envelope(env)
        return [(event.get("job_id", ""), {**event, "v": 1})]  # a progress marker has no job

    def envelope_agent(source: str, target_attr: str, parse: Callable) -> None:
        target = out(app, target_attr)

        async def normalize_envelopes(stream: faust.StreamT) -> None:
            async for events in stream.take_events(BATCH, within=WITHIN_S):
                metrics.RECORDS_IN.labels(source).inc(len(events))
                for ev in events:
                    with door.guard(source, ev.value, ev.message.offset):
                        for key, record in parse(ev.value, ev.message.timestamp):
                            door.publish(target, key, record)

        app.agent(hpc.raw(source), name=f"normalize-{source}")(normalize_envelopes)

    envelope_agent(names.raw_ipmi, "samples_ipmi", ipmi_records)
    envelope_agent(names.raw_slurm, "jobs", slurm_records)

