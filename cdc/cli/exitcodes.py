"""The exit codes of every ``cdc`` command, the same in every output format.

A scheduler or an alert tells the three failures apart without reading the text: the command
could not run at all (connection, permission, configuration), the pipeline is unhealthy
(``status``), or a target differs from its source (``verify``).
"""

from __future__ import annotations

OK = 0
COULD_NOT_RUN = 1  # bad input, no connection, a missing privilege, a refused statement
USAGE = 2  # wrong command line (argparse's own code)
UNHEALTHY = 3  # status: pending events older than the threshold, a failing table, ...
DIFFERS = 4  # verify: a target differs from its source
