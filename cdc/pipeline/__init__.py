"""The jobs that move data: the drain loop, decoding, the initial snapshot, verify, resync,
and the source-vs-Delta comparison."""
