"""The fold: one table's decoded events of a batch, reduced to one action per key.

The rules, per key, over the events after the batch's last TRUNCATE of the table (a
TRUNCATE empties the target, so there the key's start state is "absent"):

1. Existence. A primary key holds at the end of every statement (also a DEFERRABLE one that
   is not INITIALLY DEFERRED), so across one transaction existence at the end = existence
   at its start + ``n``, with n = its INSERTs - its DELETEs of the key, -1, 0 or +1. So
   per key and transaction:

   - n = +1: the row exists after it; n = -1: it does not;
   - n = 0 with the transaction's last INSERT after its last DELETE (delete then re-insert,
     a key moved away and back): the row exists after it (it existed before);
   - n = 0 with the last DELETE after the last INSERT: the key was moved in and the row that
     held it moved out within one statement (``update t set id = id + 1`` over 1, 2, 3 is
     captured as D1 I2 D2 I3 D3 I4; a swap 1 <-> 2 as D1 I2 D2 I1), or a row was inserted
     and deleted again: the row exists after it exactly when it existed before.

   The key's last transaction of the first two kinds decides: **upsert** if the row exists
   after it, **delete** if not (the transactions after it keep existence as it was). A key
   with INSERTs or DELETEs in transactions of the third kind only is **updated if present**:
   the MERGE's MATCHED branch updates the row, NOT MATCHED does nothing. A key with
   UPDATEs only is **upserted** (an UPDATE of a row the target lacks writes the row: the
   repair of a drifted target).

   Deciding by the last deciding transaction, not by a count over the whole batch, keeps
   the fold independent of the target's start state wherever the events allow: a target
   that already shows some of the batch's transactions (a snapshot taken during the batch,
   ``cdc resync``) ends the same as one that shows none of them.

2. The row that exists at the end is the one the key's last INSERT wrote (within a
   statement a key is inserted at most once and deleted at most once, and the row deleted
   is the one that held the key before the statement). So its columns are those of the last
   INSERT, then each later value an UPDATE carries, in event order (a DELETE's values, the
   old row in json and urlenc, never count): sql-format UPDATEs carry only the
   changed columns and merge column-wise, onto the batch's state or the target's row. With
   no INSERT in the batch, every UPDATE's values count, onto the target's row.

3. Keys compare as PostgreSQL compares them. A ``numeric`` key without a precision is kept
   as its exact text, and ``1.0`` and ``1.00`` are one key: it is folded and matched on the
   text without trailing fractional zeros (``norm_numeric``). A float key ``-0`` equals
   ``0`` (and NaN equals NaN) for Spark's grouping and joins too. For both, the stored key
   is the text / value of the key's last non-DELETE event (PostgreSQL may hold ``1.00``
   where the target holds ``1.0``): the MERGE sets it.

Not covered (documented in docs/drain.md): a key made INITIALLY DEFERRED where two rows share
a key across statements of one transaction and the later-inserted one leaves again; a
sql-format DELETE carries only the key, so which of the two rows it removed is unknown.
"""

from __future__ import annotations

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc.pg.pgtypes import Column
from cdc.rows import (
    DELETE,
    GONE,
    GONE_AT,
    KEEPS,
    UPDATE_IF_PRESENT,
    UPSERT,
    is_numeric_text,
    match_key,
    meta,
    present,
    restates_key,
    value,
)


def norm_numeric(text: SparkColumn) -> SparkColumn:
    """PostgreSQL numeric text without trailing fractional zeros (``1.50`` -> ``1.5``,
    ``2.000`` -> ``2``, ``-0.0`` -> ``0``); NaN and Infinity as they are."""
    stripped = F.when(
        text.contains("."),
        F.regexp_replace(F.regexp_replace(text, r"0+$", ""), r"\.$", ""),
    ).otherwise(text)
    return F.when(stripped == "-0", F.lit("0")).otherwise(stripped)


def fold(rows: DataFrame, columns: list[Column], soft: bool = False) -> DataFrame:
    """One row per key: per column its value (``value(i)``) and whether the batch sets it
    (``__has<i>``), ``__action`` (UPSERT, DELETE or UPDATE_IF_PRESENT), ``__reset`` (the
    key has an INSERT: its columns start from it), and ``match_key(i)`` for restated keys;
    soft (a target that keeps deleted rows): also GONE, GONE_AT and KEEPS (cdc.rows).

    Two aggregations, no window: per key and transaction, then per key."""
    op, ev_id = F.col(meta("op")), F.col(meta("ev_id"))
    groups, names = [], []
    for i, c in enumerate(columns):
        if not c.is_key:
            continue
        if restates_key(c):
            match = norm_numeric(F.col(value(i))) if is_numeric_text(c) else F.col(value(i))
            groups.append(match.alias(match_key(i)))
            names.append(match_key(i))
        else:
            groups.append(F.col(value(i)))
            names.append(value(i))
    resets = op.isin("I", "D")
    per_txn = [
        F.sum(F.when(op == "I", 1).when(op == "D", -1).otherwise(0)).alias("__n"),
        F.max(F.when(resets, ev_id)).alias("__reset_id"),
        F.max_by(op, F.when(resets, ev_id)).alias("__reset_op"),
        F.max(F.when(op == "I", ev_id)).alias("__insert_id"),
    ]
    if soft:  # the time of the transaction's last DELETE (a transaction's events share it)
        deleted = F.when(op == "D", ev_id)
        per_txn += [
            F.max_by(F.col(meta("ev_time")), deleted).alias("__gone_time"),
            F.max(deleted).alias("__gone_id"),
        ]
    n, reset_id = F.col("__n"), F.col("__reset_id")
    # a transaction decides the key's existence unless it moved a row in and the row that
    # held the key out (net 0, its last INSERT / DELETE a DELETE): then it keeps it as it was
    decisive = (n != 0) | (F.col("__reset_op") == "I")
    per_key = [
        F.max_by(n >= 0, F.when(decisive, reset_id)).alias("__exists"),
        F.max(reset_id).alias("__reset_id"),
        F.max("__insert_id").alias("__last_insert"),
    ]
    if soft:
        per_key.append(F.max_by("__gone_time", "__gone_id").alias("__gone_time"))
    for i, c in enumerate(columns):
        if restates_key(c):
            at = F.when(op != "D", ev_id)
            per_txn += [F.max_by(value(i), at).alias(value(i)), F.max(at).alias(f"__at{i}")]
            per_key.append(F.max_by(value(i), f"__at{i}").alias(value(i)))
        elif not c.is_key:
            # a DELETE's values (json and urlenc carry the old row) are not the row's
            at = F.when(F.col(present(i)) & (op != "D"), ev_id)
            per_txn += [F.max_by(value(i), at).alias(f"__last{i}"), F.max(at).alias(f"__at{i}")]
            per_key += [
                F.max_by(f"__last{i}", f"__at{i}").alias(f"__last{i}"),
                F.max(f"__at{i}").alias(f"__at{i}"),
            ]
    txns = rows.groupBy(*groups, F.col(meta("ev_txid"))).agg(*per_txn)
    grouped = txns.groupBy(*names).agg(*per_key)
    ins, exists = F.col("__last_insert"), F.col("__exists")
    action = (
        F.when(F.col("__reset_id").isNull() | exists, F.lit(UPSERT))
        .when(exists.isNull(), F.lit(UPDATE_IF_PRESENT))
        .otherwise(F.lit(DELETE))
    )
    out: list[SparkColumn] = []
    for i, c in enumerate(columns):
        if c.is_key:
            out.append(F.col(value(i)))
            if restates_key(c):
                out.append(F.col(match_key(i)))
            continue
        at = F.col(f"__at{i}")
        has = at.isNotNull() & (ins.isNull() | (at >= ins))
        out += [F.when(has, F.col(f"__last{i}")).alias(value(i)), has.alias(f"__has{i}")]
    out += [action.alias("__action"), ins.isNotNull().alias("__reset")]
    if soft:
        upsert, delete = action == F.lit(UPSERT), action == F.lit(DELETE)
        out += [
            delete.alias(GONE),
            F.when(~upsert, F.col("__gone_time")).alias(GONE_AT),
            (upsert | (delete & ins.isNotNull())).alias(KEEPS),
        ]
    return grouped.select(*out)
