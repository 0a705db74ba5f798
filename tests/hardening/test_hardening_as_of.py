"""As-of times at the edges of the datetime range: a moment that leaves years 1-9999 once moved to UTC is refused
with one line (CLI exit 2, HTTP 400), never an OverflowError."""
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_server import serving

from pipelines.ingest_run import run_ingest

OUT_OF_RANGE = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00.000001+00:01",
                "9999-12-31T23:59:59.999999-00:00:01"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("as-of"), run_ingest, {"u-support": ["support"]}) as s:
        yield s


@pytest.mark.parametrize("when", OUT_OF_RANGE)
def test_the_cli_refuses_an_as_of_out_of_range_with_one_line(served, when):
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", "retrieve", "offline cache", "--workspace",
                        str(served["ws"]), "--groups", "support", f"--as-of={when}"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and "unexpected" not in r.stderr
    assert f"--as-of {when}: out of range" in r.stderr


@pytest.mark.parametrize("when", OUT_OF_RANGE)
def test_the_server_refuses_an_as_of_out_of_range_with_a_400(served, when):
    r = served["client"].post("/retrieve", json={"question": "offline cache", "user": "u-support", "as_of": when})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert f"--as-of {when}: out of range" in error and "\n" not in error


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(when=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999))
       | st.sampled_from([datetime.min, datetime.max]),
       offset=st.none() | st.timedeltas(min_value=timedelta(hours=-23, minutes=-59),
                                        max_value=timedelta(hours=23, minutes=59)))
def test_every_iso_spelling_is_a_utc_moment_or_one_line_of_refusal(served, when, offset):
    spelled = (when if offset is None else when.replace(tzinfo=timezone(offset))).isoformat()
    try:
        moment = served["reader"].resolve_as_of(spelled)
    except ValueError as err:
        assert offset is not None
        if offset.microseconds:
            assert str(err) == f"--as-of {spelled}: a UTC offset has no fractions of a second"
        else:
            assert str(err) == f"--as-of {spelled}: out of range once moved to UTC (years 1 to 9999)"
        return
    assert moment.tzinfo is None
    assert moment == (when if offset is None else (when - offset))
