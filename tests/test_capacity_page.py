"""The what-if page through Streamlit's AppTest: numbers from the model, bad input as a clear message."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[1] / "app" / "whatif_page.py")


def run(**inputs: int) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=30).run()
    for key, value in inputs.items():
        at.number_input(key=key).set_value(value)
    return at.run()


def test_defaults_show_linkedin_throughput_and_bottleneck():
    at = run()
    produced = int(at.metric[0].value.replace(",", ""))
    assert 821_557 / 1.5 <= produced <= 821_557 * 1.5  # LinkedIn, 1 producer, no replication
    assert any("producer NIC" in m.value for m in at.markdown)
    assert not at.error


def test_failure_tab_shows_blocking_time_for_the_incident():
    # 16 partitions, RF 1, 3 brokers; broker 0 holds 0, 3, 6, 9, 12, 15: 6/16 MiB/s fills 32 MiB in 85.3 s.
    at = run(brokers=3, partitions=16)
    verdict = next(m.value for m in at.markdown if "verdict" in m.value)
    assert "85.3 s" in verdict
    assert any("[0, 3, 6, 9, 12, 15]" in m.value for m in at.markdown)


def test_replication_factor_above_brokers_is_a_clear_message():
    at = run(rf=4)
    assert at.error and "replication factor" in at.error[0].value and "use at most 3" in at.error[0].value


def test_zero_brokers_is_a_clear_message():
    at = run(brokers=0)
    assert at.error and "brokers: must be greater than 0" in at.error[0].value
