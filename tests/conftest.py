"""Fixtures shared by several test files."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one local Spark session of the test run (two cores, as CI), started by the
    first test that asks for it."""
    from loaders.spark.session import spark_session

    session = spark_session(
        "local[2]", driver_memory="1g", log_dir=tmp_path_factory.mktemp("spark-log")
    )
    yield session
    session.stop()
