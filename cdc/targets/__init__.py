"""Delta targets: the Delta adapter, the per-key fold, the target kinds (mirror, history),
schema drift, and the failing marks."""
