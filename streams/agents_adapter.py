"""adapter: actions → the scheduler adapter behind the safety governor → acks.

Adapters run scheduler commands, so they run off the event loop; an adapter that raises
gives a ``failed`` ack, never a dead worker.

Exactly once across a kill -9: at start the governor reconciles the rows an interrupted
worker left ``executing`` (their acks are published) before any action is taken.  Each
action is applied with its record's place (``topic:partition:offset``) in the ledger; a
batch's acks are delivered, then marked in the ledger.  An action record redelivered
after a restart is answered from the ledger: nothing when its ack was delivered, else the
recorded outcome (the ack the interrupted worker owed).
"""
from __future__ import annotations

import asyncio
import logging

import faust

from hpcguard.connectors.adapters import ActionAck
from hpcguard.streams import metrics
from hpcguard.streams.output_log import deliver
from hpcguard.streams.topics import out

log = logging.getLogger("hpcguard.worker")


def register(app: faust.App) -> None:
    hpc = app.hpc
    pipe, door = hpc.pipeline, hpc.plumbing
    if pipe.adapter is None:
        return
    acks = out(app, "acks")
    reconciled = asyncio.Event()
    adapter = pipe.adapter

    async def send(found: list[dict]) -> None:
        """Deliver the acks, then record in the ledger that they were delivered."""
        for ack in found:
            metrics.ACKS.labels(ack.get("kind", ""), ack["status"]).inc()
        await deliver(app, acks, [(ack["action_id"], {**ack, "v": 1}) for ack in found])
        delivered = getattr(adapter, "acknowledged", None)
        if found and delivered is not None:
            await asyncio.get_running_loop().run_in_executor(None, delivered, [a["action_id"] for a in found])

    def handle(action: dict, source: str) -> dict | None:
        """The ack for one action record (``None``: its ack was delivered before a restart)."""
        answer = getattr(adapter, "redelivery", None)
        earlier = answer(action["action_id"], source) if answer is not None else None
        if earlier is not None:
            ack, delivered = earlier
            return None if delivered else ack.as_dict()
        try:
            ack = adapter.apply(action, source=source) if answer is not None else adapter.apply(action)
            return ack.as_dict()
        except Exception as exc:  # noqa: BLE001 — a worker never dies on one action
            log.exception("adapter failed on %s", action["action_id"])
            return ActionAck(action_id=action["action_id"], status="failed", adapter=getattr(adapter, "name", "?"),
                             kind=action["kind"], job_id=action.get("job_id"), nodes=action.get("nodes", []),
                             detail=f"adapter error: {exc}").as_dict()

    @app.task
    async def reconcile() -> None:
        """Finish the actions an interrupted worker left executing (the governor's ledger) before taking any."""
        try:
            finish = getattr(adapter, "reconcile", None)
            if finish is not None:
                found = await asyncio.get_running_loop().run_in_executor(None, finish)
                for ack in found:
                    log.warning("reconciled %s %s: %s: %s", ack.kind, ack.action_id, ack.status, ack.detail)
                await send([ack.as_dict() for ack in found])
        finally:
            reconciled.set()

    @app.agent(hpc.topics.actions, name="scheduler-adapter")
    async def scheduler_adapter(stream: faust.StreamT) -> None:
        loop = asyncio.get_running_loop()
        async for events in stream.take_events(100, within=0.05):
            metrics.RECORDS_IN.labels(hpc.names.actions).inc(len(events))
            await reconciled.wait()
            found = []
            for ev in events:
                m = ev.message
                with door.guard(m.topic, ev.value, m.offset):
                    action = door.decode("Action", ev.value, m.topic, m.offset)
                    if action is None:
                        continue
                    ack = await loop.run_in_executor(None, handle, action, f"{m.topic}:{m.partition}:{m.offset}")
                    if ack is not None:
                        found.append(ack)
            await send(found)
