"""ev_types of every shape the capture formats write (docs/event-format.md §0), and some that
none writes, each with the formats it is classified as: shared by the Arrow classifier's
unit test and the Spark classifiers' test, which must agree on every one."""

from __future__ import annotations

EV_TYPES: list[tuple[str | None, set[str]]] = [
    ('{"op":"INSERT","table":["public","t1"],"pkey":["id"]}', {"json"}),
    ('{"op":"TRUNCATE","table":["public","t5"],"pkey":[]}', {"json"}),
    ("I:id", {"urlenc"}),
    ("U:a, b", {"urlenc"}),
    ("D:", {"urlenc"}),
    ("I", {"sql"}),
    ("U", {"sql"}),
    ("D", {"sql"}),
    ("R", set()),  # urlenc's and sql's TRUNCATE alike: it names no format
    ("X", set()),
    ("", set()),
    ("R:id", set()),
    ("IU", set()),
    ("I\n", set()),
    ("i:id", set()),
    (" {", set()),
    (None, set()),
]
