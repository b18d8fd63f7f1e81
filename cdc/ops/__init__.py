"""Operating a pipeline: status and metrics, Delta maintenance, and ``cdc sql``."""
