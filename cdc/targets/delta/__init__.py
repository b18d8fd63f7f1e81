"""The Delta adapter: every operation on a target table, given its TableRef
(cdc.targets.table), and every Delta specific (its log, its commit identity, its features)
in one place. Callers use the names cdc.targets.delta_table gathers from these modules:

- ``on_spark``: the operations through Spark (exists / ensure / add_columns / read / append /
  overwrite / merge / version / files / optimize / vacuum, properties);
- ``spark_sql``: a MERGE plan (cdc.targets.merge_plan) rendered to Spark SQL;
- ``local``: ``LocalTable``, a table on a local path read with delta-rs, without a JVM;
- ``delta_rs``: writes by delta-rs (a MERGE plan rendered to its builder and DataFusion SQL,
  an append, a look at a key range);
- ``reshape``: a column renamed in place (column mapping turned on for it), and the table
  rewritten with wider column types in one commit (cdc.targets.schema_changes decides);
- ``history``: a table's history read by delta-rs for reads as of a tick (the commits'
  userMetadata, their ``txn`` actions, the rows at a version);
- ``datafusion``: tables read by SQL through delta-rs' QueryBuilder (``cdc sql`` without a
  JVM), each at its latest or a pinned version;
- ``commits``: the commit identity (txnAppId / txnVersion: a write given a Commit is skipped
  when its appId already committed its version), Delta's concurrent-commit conflicts
  (``retry_conflicts``), and reads of the log's files.

Tables are created without column mapping, so that every reader of Delta reads them
(delta-rs' ``to_pyarrow_table`` reads NULL in place of a mapped column's values,
cdc.targets.readers), unless a column's name cannot be stored as it is (``needs_mapping``: a
PostgreSQL column name may hold spaces and punctuation that Parquet refuses); a column added
later under such a name turns mapping on in place first (``add_columns``). Without deletion
vectors unless the session's
``spark.databricks.delta.properties.defaults.enableDeletionVectors`` asks for them: a table
without them takes small batches from the driver (cdc.engines.arrow.write), and gets them
when it grows past that path's size (``enable_deletion_vectors``). On a local path, the
table's existence, schema and properties are read from its log without a JVM (LocalTable).
"""
