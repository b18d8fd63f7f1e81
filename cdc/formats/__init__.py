"""The capture formats (json, urlenc, sql): how each one's ``ev_data`` is parsed into column
values. Importing this package needs no pyspark."""
