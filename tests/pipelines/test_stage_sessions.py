"""The engine URL that names a per-row stage's session made ahead by run (``stage_sessions``)."""

from __future__ import annotations

import pytest

from minikafka.pipelines.launch.stage_sessions import with_session
from minikafka.spark.engine import parse_remote


@pytest.mark.parametrize("url, expected", [
    ("sc://127.0.0.1:15002", "sc://127.0.0.1:15002/;session_id=S"),
    ("sc://h:1/;token=x", "sc://h:1/;token=x;session_id=S"),
    ("sc://h:1/;session_id=old;token=x", "sc://h:1/;token=x;session_id=S"),
])
def test_a_session_url_keeps_the_engine_and_its_other_parameters_and_names_one_session(url, expected):
    assert with_session(url, "S") == expected
    assert parse_remote(with_session(url, "S")) == parse_remote(url)
