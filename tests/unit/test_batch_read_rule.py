"""How a batch is read, without a server: ``source.jdbc_url`` checked as the file is loaded
(its password never shown), the properties a configured URL gets, and the rule of
``jdbc_min_events`` (the file's, else a default by the Spark master)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from cdc import config
from cdc.errors import ConfigError
from cdc.pg.jdbc import DRIVER, configured, redacted, url_parameters
from cdc.pipeline.reader import DEFAULT_JDBC_MIN_EVENTS, jdbc_threshold

GOOD = {
    "source": {"dsn": "host=/run/postgresql dbname=shop", "queue": "q", "consumer": "c"},
    "target": {"path": "/data/delta"},
    "tables": [{"source": "public.orders", "target": "orders"}],
}
URL = "jdbc:postgresql://db.internal:5432/shop?ssl=true&sslmode=verify-full"


def source(**keys: object) -> config.Source:
    data = copy.deepcopy(GOOD)
    data["source"].update(keys)
    return config.parse(data).source


def test_jdbc_url_is_optional_and_kept_as_written():
    """Without the key the URL is made from the DSN (None here); with it, it is kept."""
    assert source().jdbc_url is None
    assert source(jdbc_url=f"  {URL} ").jdbc_url == URL


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("postgresql://db/shop", "must be a URL of PostgreSQL's JDBC driver, starting with"),
        ("jdbc:mysql://db/shop", "must be a URL of PostgreSQL's JDBC driver"),
        ("JDBC:POSTGRESQL://db/shop", "must be a URL of PostgreSQL's JDBC driver"),
        ("jdbc:postgresql://db/shop?password=${PW}", "is not read from the environment"),
        ("jdbc:postgresql://db/ shop", "holds white space"),
        ("", "must be a non-empty string"),
        (5432, "must be a non-empty string, not 5432"),
    ],
)
def test_a_bad_jdbc_url_is_refused_naming_the_key(value, message):
    with pytest.raises(ConfigError, match=r"^source\.jdbc_url ") as caught:
        source(jdbc_url=value)
    assert message in str(caught.value)


def test_a_refused_url_never_shows_its_password():
    """The message shows the URL with its password parameters' values hidden."""
    with pytest.raises(ConfigError) as caught:
        source(jdbc_url="postgresql://db/shop?user=u&password=s3cret&sslpassword=k3y")
    text = str(caught.value)
    assert "s3cret" not in text and "k3y" not in text
    assert "password=***" in text and "sslpassword=***" in text


def test_the_source_repr_leaves_the_url_out():
    """A logged Source never carries the URL (it may hold a password)."""
    assert "s3cret" not in repr(source(jdbc_url="jdbc:postgresql://db/shop?password=s3cret"))


def test_redacted_and_url_parameters():
    url = "jdbc:postgresql://db/shop?user=cdc%20reader&Password=a%26b&ssl=true"
    assert redacted(url) == "jdbc:postgresql://db/shop?user=cdc%20reader&Password=***&ssl=true"
    assert url_parameters(url) == {"user": "cdc reader", "Password": "a&b", "ssl": "true"}
    assert url_parameters("jdbc:postgresql://db/shop") == {}


def test_a_url_without_user_gets_the_dsn_role_and_password():
    """The role and password libpq used for the DSN go with a URL that names no user; a URL
    naming a user brings its own credentials (no connection is asked)."""
    conn = SimpleNamespace(info=SimpleNamespace(user="cdc_reader", password="pw ' x"))
    target = configured(URL, "dbname=shop", conn)  # type: ignore[arg-type]
    assert target.url == URL
    assert target.properties == {"driver": DRIVER, "user": "cdc_reader", "password": "pw ' x"}
    no_password = SimpleNamespace(info=SimpleNamespace(user="cdc_reader", password=""))
    assert "password" not in configured(URL, "", no_password).properties  # type: ignore[arg-type]
    own = configured(f"{URL}&user=other&password=x", "", None)
    assert own.properties == {"driver": DRIVER}


def test_jdbc_min_events_is_the_files_else_the_default():
    """Not in the file: the default, on any master (the driver's decode and fold beat
    Spark's below it, docs/benchmarks.md); in the file: the file's."""
    unset = source()
    assert unset.jdbc_min_events is None
    assert jdbc_threshold(unset) == (DEFAULT_JDBC_MIN_EVENTS, "the default")
    assert jdbc_threshold(source(jdbc_min_events=5000)) == (5000, "source.jdbc_min_events")


@pytest.mark.parametrize("value", [0, -1, "1000", True])
def test_a_bad_jdbc_min_events_is_refused(value):
    with pytest.raises(ConfigError, match=r"source\.jdbc_min_events must be a positive integer"):
        source(jdbc_min_events=value)
