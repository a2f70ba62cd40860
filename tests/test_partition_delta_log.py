"""The node grids' changelog: one delta record per partition and batch, a snapshot per node now and then
(``streams/delta_log.PartitionDeltaLog``).  What a restart reads back is what was written, whatever record a
kill cut off, and nothing a node still needs is deleted."""
from __future__ import annotations

import json
import random
from types import SimpleNamespace

from hpcguard.streams.delta_log import PartitionDeltaLog


class Table(SimpleNamespace):
    """A changelogged table's store and its changelog (what a restart recovers: the newest value per key)."""

    def __init__(self):
        super().__init__(data={}, log=[])

    def send_changelog(self, partition, key, value, **kwargs):
        self.log.append((partition, key, value))

    def recovered(self, upto=None):
        data = {}
        for _, key, value in self.log[:upto]:
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        return SimpleNamespace(data=data, send_changelog=self.send_changelog)


def replay(snapshot, deltas):
    """An entity's state from its snapshot and deltas: here a counter and the last value."""
    state = dict(snapshot or {"n": 0, "last": None})
    for d in deltas:
        state = {"n": state["n"] + d["n"], "last": d["last"]}
    return {"n": state["n"], "last": state["last"]}


def run(table, rounds, entities, period=8, seed=0, state=None, log=None):
    rng = random.Random(seed)
    state = state if state is not None else {}
    log = log or PartitionDeltaLog(table, "~g~", period=period, part_size=3)
    pending = {}

    def record(entity, whole):
        add = pending.pop(entity, 0)
        s = state.setdefault(entity, {"n": 0, "last": None})
        if whole:
            return dict(s)
        return {"n": add, "last": s["last"]}

    for r in range(rounds):
        touched = rng.sample(entities, rng.randint(0, len(entities)))
        for e in touched:
            s = state.setdefault(e, {"n": 0, "last": None})
            s["n"] += 1
            s["last"] = r
            pending[e] = pending.get(e, 0) + 1
        log.write(0, touched, record)
    return state, log


def test_a_restart_reads_back_every_entity_as_written_and_old_batches_go():
    table = Table()
    entities = [f"n{i}" for i in range(11)]
    state, _ = run(table, 200, entities)
    back = PartitionDeltaLog(table.recovered(), "~g~", period=8)
    assert {e: replay(*back.load(0, e)) for e in state} == state
    batches = {k.split("@")[1].split(":")[0] for k in table.recovered().data if k.startswith("~g~")}
    assert len(batches) <= 8  # a record lives at most a period: every entity in it had its turn since
    data = table.recovered().data
    parts = [k for k in data if k.startswith("~g~") and not k.endswith(":0")]
    assert parts  # more than part_size entities in a batch: split over records
    newest = max(int(k.split("@")[1].split(":")[0]) for k in data if k.startswith("~g~"))
    for key in (k for k in data if k.startswith("~g~")):  # a record is kept while an entity still needs it
        batch = int(key.split("@")[1].split(":")[0])
        assert batch == newest or any(data.get(e, {}).get("batch", 0) < batch for e in data[key]["entities"]), key


def test_entities_untouched_for_long_are_snapshotted_before_their_deltas_go():
    """An entity touched once and never again still loads: its snapshot is written before its batch is deleted."""
    table = Table()
    state, log = run(table, 3, ["a", "b"], period=4, seed=1)
    state2, _ = run(table, 50, ["c"], period=4, seed=2, state=state, log=log)
    back = PartitionDeltaLog(table.recovered(), "~g~", period=4)
    assert {e: replay(*back.load(0, e)) for e in state2} == state2


def test_a_kill_between_any_two_records_loses_nothing_that_was_written():
    """Cut the changelog after any record: each entity loads as of a batch whose entry (or snapshot) made it, and a
    restarted log that writes on from there agrees with its own records."""
    table = Table()
    entities = [f"n{i}" for i in range(7)]
    history = []  # after each batch: the state of every entity
    rng_state = {}
    log = PartitionDeltaLog(table, "~g~", period=6, part_size=2)
    for r in range(40):
        run(table, 1, entities, period=6, seed=r, state=rng_state, log=log)
        history.append((len(table.log), {e: dict(s) for e, s in rng_state.items()}))
    for cut in range(1, len(table.log) + 1):
        back = PartitionDeltaLog(table.recovered(cut), "~g~", period=6)
        loaded = {e: replay(*back.load(0, e)) for e in entities}
        for e, s in loaded.items():
            # an entity's state is one it had after some batch (a redelivery brings the rest)
            assert s == {"n": 0, "last": None} or any(h[1].get(e) == s for h in history), (cut, e)
        done = [h for n, h in history if n <= cut]
        if done:
            for e, s in done[-1].items():
                assert loaded[e]["n"] >= s["n"], (cut, e)  # nothing a finished batch wrote is lost


def test_records_a_kill_left_behind_go_at_the_restart():
    """A kill after a batch's snapshots and before its tombstones leaves absorbed records: the restarted log deletes
    them (only the newest batch's record may hold no entity still needing it)."""
    table = Table()
    run(table, 30, [f"n{i}" for i in range(9)], period=4)
    tombstones = [i for i, (_, _, v) in enumerate(table.log) if v is None]
    cut = tombstones[-1]  # the last tombstone never reached the changelog
    recovered = table.recovered(cut)
    back = PartitionDeltaLog(recovered, "~g~", period=4)
    back.load(0, "n0")
    data = recovered.data
    newest = max(int(k.split("@")[1].split(":")[0]) for k in data if k.startswith("~g~"))
    kept = [k for k in data if k.startswith("~g~") and int(k.split("@")[1].split(":")[0]) != newest]
    assert all(any(data.get(e, {}).get("batch", 0) < int(k.split("@")[1].split(":")[0]) for e in data[k]["entities"])
               for k in kept)
    assert table.log[cut][1] not in data  # the lost tombstone was sent again


def test_a_snapshot_of_the_per_entity_format_is_not_read():
    table = Table()
    table.data["n1"] = {"seq": 40, "n": 5}
    assert PartitionDeltaLog(table, "~g~").load(0, "n1") == (None, [])


def test_a_part_holds_at_most_part_bytes_of_json():
    """A batch whose deltas are large (a node catching up after an outage) is split by size, not only by count."""
    table = Table()
    log = PartitionDeltaLog(table, "~g~", part_size=256, part_bytes=1000)
    log.write(0, [f"n{i}" for i in range(10)], lambda e, whole: {"steps": ["x" * 300]})
    parts = [v for _, k, v in table.log if k.startswith("~g~")]
    assert [len(p["entities"]) for p in parts] == [3, 3, 3, 1]  # 3 deltas of ~320 B fit in 1,000 B
    assert all(len(json.dumps(p["entities"])) <= 1000 + 20 for p in parts)
