"""The JDBC settings made from libpq's effective connection settings (cdc.pg.jdbc.translate):
the URL, the properties the driver knows, and the refusals when JDBC cannot follow."""

from __future__ import annotations

import pytest

from cdc.pg.jdbc import DRIVER, NoJdbc, translate

DEFAULTS = {"sslmode": "prefer", "gssencmode": "prefer", "channel_binding": "prefer"}


def jdbc(options=None, host="db.example", port="6543", password="p", **kwargs):
    """translate() for a connection to db.example:6543/shop as role u."""
    settings = {"host": host, "port": port, **(options or {})}
    return translate(
        settings,
        host=host,
        port=port,
        dbname=kwargs.pop("dbname", "shop"),
        user="u",
        password=password,
        defaults=DEFAULTS,
    )


def test_host_port_database_role_and_password():
    """The connection's host, port, database, role and password make the URL and properties."""
    target = jdbc()
    assert target.url == "jdbc:postgresql://db.example:6543/shop"
    assert target.properties == {"driver": DRIVER, "user": "u", "password": "p"}


def test_no_password_means_no_password_property():
    """A connection that used no password passes none."""
    assert "password" not in jdbc(password=None).properties


def test_a_unix_socket_has_no_jdbc_equivalent():
    """A socket folder (or abstract socket, or libpq's default socket) is refused by name."""
    for host in ("/var/run/postgresql", "@abstract", ""):
        with pytest.raises(NoJdbc, match="unix socket"):
            jdbc(host=host)


def test_ssl_settings_become_the_drivers_properties():
    """sslmode and the certificate files reach the driver under its property names."""
    options = {
        "sslmode": "verify-full",
        "sslrootcert": "/certs/root.crt",
        "sslcert": "/certs/client.crt",
        "sslkey": "/certs/client.pk8",
        "sslpassword": "kp",
        "application_name": "cdc drain",
        "connect_timeout": "7",
        "options": "-c search_path=shop",
    }
    props = jdbc(options).properties
    assert props == {
        "driver": DRIVER,
        "user": "u",
        "password": "p",
        "sslmode": "verify-full",
        "sslrootcert": "/certs/root.crt",
        "sslcert": "/certs/client.crt",
        "sslkey": "/certs/client.pk8",
        "sslpassword": "kp",
        "ApplicationName": "cdc drain",
        "connectTimeout": "7",
        "options": "-c search_path=shop",
    }


def test_settings_at_libpqs_default_are_left_to_the_driver():
    """sslmode=prefer and the other compiled-in defaults add no property."""
    props = jdbc({"sslmode": "prefer", "gssencmode": "prefer", "channel_binding": "prefer"})
    assert set(props.properties) == {"driver", "user", "password"}
    assert jdbc({"sslmode": "disable"}).properties["sslmode"] == "disable"
    assert jdbc({"gssencmode": "disable"}).properties["gssEncMode"] == "disable"


def test_several_tcp_hosts_become_the_drivers_host_list():
    """host=a,b with one port or a port each: every host, in order, with its port."""
    one_port = translate(
        {"host": "a,b", "port": "5432", "target_session_attrs": "read-write"},
        host="b", port="5432", dbname="shop", user="u", password=None,
    )  # fmt: skip
    assert one_port.url == "jdbc:postgresql://a:5432,b:5432/shop"
    assert one_port.properties["targetServerType"] == "primary"
    ports = translate(
        {"host": "a,b", "port": "5433,5434", "load_balance_hosts": "random"},
        host="a", port="5433", dbname="shop", user="u", password=None,
    )  # fmt: skip
    assert ports.url == "jdbc:postgresql://a:5433,b:5434/shop"
    assert ports.properties["loadBalanceHosts"] == "true"


def test_a_socket_among_the_hosts_leaves_the_host_reached():
    """host=/sock,b reached over b: the URL names b only (the socket has no JDBC form)."""
    target = translate(
        {"host": "/run/pg,b", "port": "5432"},
        host="b", port="5432", dbname="shop", user="u", password=None,
    )  # fmt: skip
    assert target.url == "jdbc:postgresql://b:5432/shop"


def test_hostaddr_ipv6_and_an_odd_database_name():
    """An IPv6 address is bracketed; the database name is percent-encoded."""
    target = translate(
        {"hostaddr": "::1", "port": "5432"},
        host="::1", port="5432", dbname="my db/+", user="u", password=None,
    )  # fmt: skip
    assert target.url == "jdbc:postgresql://[::1]:5432/my%20db%2F%2B"


def test_settings_the_driver_cannot_follow_are_refused():
    """target_session_attrs=read-only and sslrootcert=system have no exact JDBC form."""
    with pytest.raises(NoJdbc, match="target_session_attrs=read-only"):
        jdbc({"target_session_attrs": "read-only"})
    with pytest.raises(NoJdbc, match="sslrootcert=system"):
        jdbc({"sslrootcert": "system"})
    mapped = {"standby": "secondary", "prefer-standby": "preferSecondary", "primary": "primary"}
    for libpq, driver in mapped.items():
        assert jdbc({"target_session_attrs": libpq}).properties["targetServerType"] == driver
