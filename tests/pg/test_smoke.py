"""The queue engine's basic consumer loop on a real server."""

from cdc.pg.queue import Consumer, Producer, Queue


def test_events_flow_through_one_batch(conn):
    """Events inserted after registration come back in one batch, in ev_id order."""
    q = Queue(conn, "q")
    assert q.create()
    c = Consumer(conn, "q", "c")
    assert c.register()
    ids = [Producer(conn, "q").insert("I", f"row{i}") for i in range(3)]
    q.force_tick()
    assert q.tick() is not None
    with c.batch() as batch:
        assert [e.ev_id for e in batch.events()] == ids
    with c.batch() as batch:
        assert batch is None
