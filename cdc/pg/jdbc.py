"""The JDBC URL and properties that reach the same server, database and role as a libpq DSN.

libpq itself is the source of truth: the settings are read from an open connection
(``PQconninfo`` and ``PQhost``/``PQport``/``PQuser``/``PQpass``/``PQdb``), so whatever libpq
took from the DSN, ``PGHOST``/``PGPORT``/``PGUSER``/``PGPASSWORD``/``PGSSLMODE``..., a service
file or ``.pgpass`` is what the JDBC driver gets. Nothing is guessed from the DSN's text.

Invariants:
- A connection that went over a unix socket (a host starting with ``/`` or ``@``) has no JDBC
  equivalent: ``jdbc_url`` returns None (callers read with COPY instead) and ``require_jdbc``
  raises a ``ConfigError`` naming the socket and saying what to set.
- A libpq setting the driver cannot follow exactly (``target_session_attrs=read-only``,
  ``sslrootcert=system``) is treated the same way: never a silently weaker connection.
- Several hosts become the driver's host list when every one of them is reached over TCP;
  otherwise only the host the connection reached is used.
- The URL names the host as libpq reports it (``PQhost``): the host name when the DSN gives
  one, else ``hostaddr``; the driver resolves a name itself (it has no ``hostaddr``).
- The password is the one libpq used (from the DSN, ``PGPASSWORD`` or ``.pgpass``), for the
  host the connection reached.

The driver reads ``sslkey`` only as PKCS-8 DER or PKCS-12 (libpq reads PEM): a PEM key makes
the JDBC connection fail with the driver's message, never connect unverified.

A URL written in the pipeline file (``source.jdbc_url``) replaces the one made from libpq's
settings: ``url_problem`` says what is wrong with one, ``configured`` gives its properties
(the role and password libpq used for the DSN when the URL names no ``user``), and
``redacted`` is the only form of a URL that goes into a message or a log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

import psycopg

from cdc.errors import ConfigError

__all__ = [
    "JdbcTarget",
    "NoJdbc",
    "configured",
    "jdbc_target",
    "jdbc_url",
    "redacted",
    "require_jdbc",
    "translate",
    "url_problem",
]

DRIVER = "org.postgresql.Driver"
PREFIX = "jdbc:postgresql:"  # the URLs PostgreSQL's JDBC driver accepts
# a URL parameter holding a secret (password, sslpassword): its value never shown
SECRET_PARAMETER = re.compile(r"([?&][^=&]*password=)[^&]*", re.IGNORECASE)
# libpq keyword -> pgJDBC property, passed on as written when libpq has a value for it
SAME_VALUE = {
    "sslmode": "sslmode",  # disable, allow, prefer, require, verify-ca, verify-full in both
    "sslrootcert": "sslrootcert",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "sslpassword": "sslpassword",
    "sslnegotiation": "sslNegotiation",
    "gssencmode": "gssEncMode",
    "channel_binding": "channelBinding",
    "krbsrvname": "kerberosServerName",
    "application_name": "ApplicationName",
    "connect_timeout": "connectTimeout",  # seconds in both
    "options": "options",
}
TARGET_SERVER_TYPE = {
    "any": "any",
    "read-write": "primary",
    "primary": "primary",
    "standby": "secondary",
    "prefer-standby": "preferSecondary",
}
KEEPALIVES = {"0": "false", "1": "true"}


class NoJdbc(Exception):
    """The connection's settings have no JDBC equivalent; the message says why."""


@dataclass(frozen=True)
class JdbcTarget:
    """What Spark's JDBC source needs: ``spark.read.jdbc(url, table, properties=...)``."""

    url: str
    properties: dict[str, str]


def _is_socket(host: str) -> bool:
    return not host or host.startswith(("/", "@"))


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in value.split(",")] if value else []


def _hosts(options: Mapping[str, str | None], host: str, port: str) -> list[tuple[str, str]]:
    """The (host, port) list for the URL: every host libpq would try when all are TCP hosts,
    else the one the connection reached."""
    hosts = _split(options.get("host")) or _split(options.get("hostaddr"))
    ports = _split(options.get("port"))
    if len(hosts) < 2 or any(_is_socket(h) for h in hosts):
        return [(host, port)]
    if len(ports) == 1:
        ports = ports * len(hosts)
    if len(ports) != len(hosts):
        return [(host, port)]
    return [(h, p or port) for h, p in zip(hosts, ports, strict=True)]


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def translate(
    options: Mapping[str, str | None],
    *,
    host: str,
    port: str,
    dbname: str,
    user: str,
    password: str | None,
    defaults: Mapping[str, str | None] | None = None,
) -> JdbcTarget:
    """The JDBC URL and properties for libpq's effective ``options`` (keyword -> value, None
    when unset) and the host/port/database/role/password the connection used. ``defaults``
    are libpq's compiled-in defaults: a setting at its default is left to the driver's own
    default (the same for sslmode; for gssencmode, channel_binding, sslnegotiation and
    krbsrvname the driver's default is as safe). Raises ``NoJdbc``."""
    if _is_socket(host):
        raise NoJdbc(f"the connection goes over the unix socket in {host or 'the default folder'}")
    defaults = defaults or {}
    props = {"driver": DRIVER, "user": user}
    if password:
        props["password"] = password
    for keyword, prop in SAME_VALUE.items():
        value = options.get(keyword)
        if not value or value == defaults.get(keyword):
            continue
        if keyword == "sslrootcert" and value == "system":
            raise NoJdbc("sslrootcert=system (the JDBC driver has no such setting)")
        props[prop] = value
    target = options.get("target_session_attrs")
    if target and target != "any":
        if target not in TARGET_SERVER_TYPE:
            raise NoJdbc(f"target_session_attrs={target} (the JDBC driver has no such setting)")
        props["targetServerType"] = TARGET_SERVER_TYPE[target]
    keepalives = options.get("keepalives")
    if keepalives in KEEPALIVES:
        props["tcpKeepAlive"] = KEEPALIVES[keepalives]
    if options.get("load_balance_hosts") == "random":
        props["loadBalanceHosts"] = "true"
    hosts = ",".join(f"{_url_host(h)}:{p}" for h, p in _hosts(options, host, port))
    return JdbcTarget(f"jdbc:postgresql://{hosts}/{_url_path(dbname)}", props)


def _url_path(dbname: str) -> str:
    from urllib.parse import quote

    return quote(dbname, safe="")


def jdbc_target(conn: psycopg.Connection) -> JdbcTarget:
    """The JDBC settings of an open connection (see the module's docstring). Raises
    ``NoJdbc``."""
    info = conn.info
    options: dict[str, str | None] = {}
    defaults: dict[str, str | None] = {}
    for option in conn.pgconn.info:
        keyword = option.keyword.decode()
        options[keyword] = option.val.decode() if option.val is not None else None
        defaults[keyword] = option.compiled.decode() if option.compiled is not None else None
    return translate(
        options,
        host=info.host,
        port=str(info.port),
        dbname=info.dbname,
        user=info.user,
        password=info.password or None,
        defaults=defaults,
    )


def jdbc_url(dsn: str, conn: psycopg.Connection | None = None) -> tuple[str, dict[str, str]] | None:
    """The JDBC URL and properties for a libpq DSN, read from ``conn`` (a connection opened
    with that DSN) or from a short connection opened here; None when JDBC cannot follow the
    connection (a unix socket, see ``NoJdbc``): the caller reads with COPY instead."""
    try:
        target = _target(dsn, conn)
    except NoJdbc:
        return None
    return target.url, target.properties


def require_jdbc(
    dsn: str, conn: psycopg.Connection | None = None, purpose: str = "Spark's JDBC reader"
) -> tuple[str, dict[str, str]]:
    """Like ``jdbc_url``, for callers that have no other way: a ``ConfigError`` naming why
    JDBC cannot follow the DSN and what to set instead."""
    try:
        target = _target(dsn, conn)
    except NoJdbc as exc:
        raise ConfigError(
            f"{purpose} cannot reach the source database: {exc}. JDBC connects over TCP only:"
            " give the source DSN a host (host=<name or address> port=<port>) on which the"
            " server listens (listen_addresses), or set PGHOST to one"
        ) from exc
    return target.url, target.properties


def _target(dsn: str, conn: psycopg.Connection | None) -> JdbcTarget:
    if conn is not None:
        return jdbc_target(conn)
    with psycopg.connect(dsn, autocommit=True) as own:
        return jdbc_target(own)


def redacted(url: str) -> str:
    """The URL with the values of its password parameters replaced by ``***``: the only form
    of a configured URL that a message or a log shows."""
    return SECRET_PARAMETER.sub(r"\1***", url)


def url_problem(url: str) -> str | None:
    """What keeps a configured JDBC URL (``source.jdbc_url``) from being used, as the end of
    a sentence naming the key; None when nothing does."""
    if not url.startswith(PREFIX):
        return (
            f"must be a URL of PostgreSQL's JDBC driver, starting with {PREFIX}"
            " (jdbc:postgresql://host:port/database)"
        )
    if "${" in url:
        return (
            "holds ${...}, which is not read from the environment in [source] (only in"
            " [spark]): leave the password out of the URL, the DSN's role and password are"
            " passed with it"
        )
    if any(c.isspace() for c in url):
        return "holds white space"
    return None


def url_parameters(url: str) -> dict[str, str]:
    """The parameters after the URL's ``?`` (``user=u&ssl=true``), decoded."""
    _, _, query = url.partition("?")
    found = {}
    for pair in filter(None, query.split("&")):
        key, _, value = pair.partition("=")
        found[unquote(key)] = unquote(value)
    return found


def configured(url: str, dsn: str, conn: psycopg.Connection | None = None) -> JdbcTarget:
    """A configured URL (``url_problem`` found nothing) and its properties: a URL that names
    a ``user`` brings its own credentials; otherwise the role and password libpq used for the
    DSN (read from ``conn``, a connection opened with it, or from a short connection opened
    here, which may go over a unix socket), so that JDBC connects as the same role."""
    props = {"driver": DRIVER}
    if "user" in url_parameters(url):
        return JdbcTarget(url, props)
    if conn is not None:
        user, password = conn.info.user, conn.info.password
    else:
        with psycopg.connect(dsn, autocommit=True) as own:
            user, password = own.info.user, own.info.password
    props["user"] = user
    if password:
        props["password"] = password
    return JdbcTarget(url, props)
