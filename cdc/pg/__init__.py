"""Everything that talks to PostgreSQL, without Spark: the queue engine's install, its
producer and consumer clients, the catalog's column types, capture (attach / detach), the
ticker, and the SQL files: the repository's ``triggers/`` (shipped inside the package) and
the named queries of ``cdc/pg/queries``."""
