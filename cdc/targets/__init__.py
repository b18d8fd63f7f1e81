"""Targets: what the drain, the snapshot and maintenance write to, and how.

- table: TableRef (a target's path or catalog name, decided in one place) and Commit (the
  idempotent-write identity of a batch's write), plain values without Spark;
- delta_table: the Delta adapter, every operation on a table (another table format would be
  another adapter with these operations);
- registry (no Spark), kind, mirror, history: the target kinds behind one interface, by mode
  name; a new kind is one module and one registry entry;
- fold: the per-key fold of a batch's events (the mirror's MERGE source);
- schema_drift: a target following its source's schema; quarantine: the bad events' table;
  failing: the failing marks of targets.
"""
