"""sink: canonical records → InfluxDB (``connectors.influx.InfluxSink``, batched, bounded)."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust

from hpcguard.connectors.influx import SINK_TOPICS
from hpcguard.connectors.lineprotocol import LineProtocolError

log = logging.getLogger("hpcguard.worker")


def register(app: faust.App) -> None:
    hpc = app.hpc
    sink, door = hpc.pipeline.sink, hpc.plumbing
    if sink is None:
        return
    kinds = {getattr(hpc.names, attr): kind for attr, kind in SINK_TOPICS.items()}

    @app.agent(hpc.raw(*kinds), name="influx-sink")
    async def influx_sink(stream: faust.StreamT) -> None:
        async for events in stream.take_events(1000, within=0.1):
            for ev in events:
                source = ev.message.topic
                with door.guard(source, ev.value, ev.message.offset):
                    record, kind = door.loads(ev.value), kinds[source]
                    batch = kind == "NodeSample" and isinstance(record, dict) and "samples" in record
                    for item in record["samples"] if batch else [record]:  # a NodeSamples batch: its samples
                        try:
                            sink.add(kind, item)
                        except (LineProtocolError, ValueError, TypeError, KeyError) as exc:
                            door.dead_letter(source, "sink_rejected", f"InfluxDB sink cannot write it: {exc}", item,
                                             offset=ev.message.offset)

    @app.on_before_shutdown.connect
    async def close_sink(app: faust.App, **kwargs: Any) -> None:
        stats = await asyncio.get_running_loop().run_in_executor(None, sink.close)
        log.info("InfluxDB sink closed: %s", stats)
