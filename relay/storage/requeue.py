"""Replay and release: failed deliveries sent again with a fresh retry budget, held ones sent now. Each is taken
under its lease and read as it is now (`Store.take_and_read`): nothing writes back a state read before, so a
delivered delivery is never made due again. A digest's item goes out with its digest (`carried`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from relay.core.model import Delivery, State
from relay.storage.leases import delivery_unit
from relay.storage.store import StateChange, Store
from relay.storage.work_queue import WorkQueue


def release(work: WorkQueue, records: list[Delivery], dry_run: bool = False) -> int:
    """Send held deliveries now (their old wake-ups find them sent); how many go out, as `carried` lists them."""

    def queue(store: Store, current: Delivery) -> None:
        current.state = State.QUEUED
        # A digest, queued, goes out as it is; a delivery still to gather is marked, so that it gathers apart
        # from what its route holds (`relay.digests.model.gather_key`) and no quiet hours hold it.
        current.released = current.released or not current.items
        store.update(current, State.HELD)  # lets go of the lease

    return _send_again(work, records, State.HELD, dry_run, "relay_releases_total", queue)


def replay(work: WorkQueue, records: list[Delivery], attempts: int, dry_run: bool = False) -> int:
    """Requeue failed deliveries with a fresh retry budget; how many go out, as `carried` lists them."""

    def requeue(store: Store, record: Delivery) -> None:
        record.state = State.QUEUED
        record.maxAttempts = record.attempts + attempts
        record.lastError = (record.lastError or "") and f"replayed after: {record.lastError}"
        # A digest's items go back with it (out of the failed list), to be sent in it again.
        items = [i for i in store.deliveries(record.items) if i is not None and i.state is State.FAILED]
        store.update_many([StateChange(record, State.FAILED)] + [_requeued(i, State.FAILED) for i in items])

    return _send_again(work, records, State.FAILED, dry_run, "relay_replays_total", requeue)


def _send_again(
    work: WorkQueue,
    records: list[Delivery],
    state: State,
    dry_run: bool,
    counter: str,
    store_one: Callable[[Store, Delivery], None],
) -> int:
    """What a replay and a release share; how many go out (with `dry_run`, would)."""
    store = work.store
    chosen = carried(store, records, state)
    if dry_run or not chosen:
        return len(chosen)
    sent = []
    for current in taken(store, chosen, state):
        store_one(store, current)
        sent.append(current.id)
    if sent:
        store.incr(counter, len(sent))
        work.enqueue_deliveries(sent)
    return len(sent)


def carried(store: Store, records: list[Delivery], state: State) -> list[Delivery]:
    """The deliveries sent for `records`, those in `state`: an item gathered into a digest stands for its digest
    (once, however many of its items were chosen)."""
    wanted = list(dict.fromkeys(r.digest for r in records if r.digest))
    found = {d.id: d for d in store.deliveries(wanted) if d is not None}
    out = {r.id: r for r in records if not r.digest}
    out.update((i, found[i]) for i in wanted if i in found and i not in out)
    return [r for r in out.values() if r.state is state]


def taken(store: Store, chosen: list[Delivery], state: State) -> Iterator[Delivery]:
    """Each still in `state`, under its lease and read as it is now; one a worker has in hand is left to it."""
    for record in chosen:
        ours, current = store.take_and_read(record.id)
        if not ours or current is None:
            continue
        if current.state is not state:
            store.leases.release([delivery_unit(current.id)], store.owner)
            continue
        yield current


def _requeued(item: Delivery, previous: State) -> StateChange:
    item.state = State.QUEUED
    return StateChange(item, previous)
