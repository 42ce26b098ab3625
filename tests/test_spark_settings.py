"""What ``kobs stream`` asks of Spark for a cluster master: where its driver listens and is reached, and RPC
authentication (``spark_jobs.stream.cluster_settings``); the standalone test runs it against a real master
that requires the secret (``tests/test_stream_standalone.py``)."""

from __future__ import annotations

import pytest

from common.config import ConfigError, Spark
from spark_jobs.stream import cluster_settings


def test_a_local_master_needs_nothing_and_binds_loopback_by_its_own_default():
    assert cluster_settings("local[2]", Spark(authenticate=True)) == {}


def test_a_spark_master_gets_loopback_by_default_and_the_shared_secret(monkeypatch):
    monkeypatch.setenv("KOBS_SPARK_SECRET", "s3cret")
    settings = cluster_settings("spark://10.0.0.5:7077", Spark(auth_secret_env="KOBS_SPARK_SECRET"))
    assert settings == {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.authenticate": "true",
        "spark.authenticate.secret": "s3cret",
    }


def test_yarn_makes_its_own_secret_and_the_driver_binds_where_configured():
    settings = cluster_settings("yarn", Spark(driver_host="10.0.0.9", bind_address="0.0.0.0"))
    assert settings == {
        "spark.driver.host": "10.0.0.9",
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.authenticate": "true",
    }


def test_a_spark_master_without_a_secret_is_refused_in_one_line_naming_the_keys(monkeypatch):
    with pytest.raises(
        ConfigError, match=r"^config error: spark\.auth_secret_env is required .*spark\.authenticate: false"
    ):
        cluster_settings("spark://10.0.0.5:7077", Spark())
    monkeypatch.delenv("KOBS_SPARK_SECRET", raising=False)
    with pytest.raises(
        ConfigError, match=r"spark\.auth_secret_env names environment variable KOBS_SPARK_SECRET"
    ):
        cluster_settings("spark://10.0.0.5:7077", Spark(auth_secret_env="KOBS_SPARK_SECRET"))
    assert "spark.authenticate" not in cluster_settings("spark://10.0.0.5:7077", Spark(authenticate=False))
