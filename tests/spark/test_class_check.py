"""The classpath check a session makes as it starts (cdc.spark.check_classes), on the real
JVM of the shared session: Delta and the JDBC driver load; a class that is not there gives
one line saying what to give spark-submit."""

from __future__ import annotations

import pytest

from cdc import jars
from cdc import spark as spark_module
from cdc.errors import ConfigError

pytestmark = pytest.mark.spark


def test_the_session_has_every_needed_class(spark) -> None:
    """The shared session (the factory's) loads Delta's classes and the JDBC driver."""
    assert spark_module.missing_classes(spark, spark_module.NEEDED_CLASSES) == []
    spark_module.check_classes(spark)


def test_a_missing_class_says_what_to_pass(spark) -> None:
    """A class the JVM cannot load is named, with --packages and --jars as files."""
    names = [*spark_module.NEEDED_CLASSES, "io.delta.sql.NoSuchExtension"]
    with pytest.raises(ConfigError) as caught:
        spark_module.check_classes(spark, names)
    message = str(caught.value)
    assert message.startswith("io.delta.sql.NoSuchExtension not on Spark's classpath: give")
    assert f"--packages {jars.coordinates()}" in message
    assert "--jars takes files, not a folder" in message and "cdc submit" in message
    assert "\n" not in message
