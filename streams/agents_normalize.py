"""normalize: raw LDMS rows, IPMI envelopes and sacct envelopes → canonical records.

Every raw record passes the door (size, depth, types, time bounds, ids) before a
parser sees it; each batch is handled record by record under the plumbing's guard, so
one bad record becomes one dead letter and the rest of the batch goes on.
"""
from __future__ import annotations

from typing import Callable

import faust

from hpcguard.connectors.ipmi import decode_ipmi_envelope
from hpcguard.connectors.ldms import LdmsColumns, LdmsDecoder
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.connectors.sacct import decode_slurm_envelope
from hpcguard.connectors.validation import ValidationError, require_samples
from hpcguard.streams import metrics
from hpcguard.streams.app import out

BATCH, WITHIN_S = 1000, 0.05


def register(app: faust.App) -> None:
    hpc = app.hpc
    door, names = hpc.plumbing, hpc.names
    mapping = hpc.pipeline.mapping or SensorMapping.load(None)
    ldms = LdmsDecoder(mapping, columns=LdmsColumns.from_settings(hpc.settings))  # [ldms] of --config too

    def ldms_agent(schema: str, name: str) -> None:
        target = out(app, "samples_io" if schema == "lustre_client" else "samples_os")

        async def normalize_ldms(stream: faust.StreamT) -> None:
            async for events in stream.take_events(BATCH, within=WITHIN_S):
                metrics.RECORDS_IN.labels(name).inc(len(events))
                for ev in events:
                    with door.guard(name, ev.value, ev.message.offset):
                        sample = ldms.decode(schema, door.check("ldms", door.loads(ev.value)))
                        if sample is not None:
                            door.publish(target, sample["node"], {**sample, "ingest_time": ev.message.timestamp,
                                                                  "v": 1})

        app.agent(hpc.raw(name), name=f"normalize-ldms-{schema}")(normalize_ldms)

    for schema, name in zip(hpc.settings.topics.ldms_schemas, names.ldms):
        ldms_agent(schema, name)

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
        event = decode_slurm_envelope(door.check("slurm", door.loads(raw)))
        return [(event["job_id"], {**event, "v": 1})]

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

