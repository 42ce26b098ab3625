"""The what-if page through Streamlit's AppTest: numbers from the model, bad input as a clear message."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from derived_exporter import DerivedExporter
from streamlit.testing.v1 import AppTest
from waiting import wait_for

from app.capacity.model import Hardware, Workload, throughput
from app.cluster import MIB, cluster_shape, traffic_queries, traffic_shape
from common.errors import InputError
from peers import kafka_tools
from peers.process import free_port
from peers.prometheus import Prometheus
from peers.stack import create_topic

PAGE = str(Path(__file__).resolve().parents[1] / "app" / "whatif_page.py")
COMPARE, PLACEMENT = 0, 1  # tables in tab order: throughput's comparison, the placement


def run(**inputs: int) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=30).run()
    for key, value in inputs.items():
        at.number_input(key=key).set_value(value)
    return at.run()


def test_defaults_show_linkedin_throughput_and_bottleneck():
    at = run()
    produced = int(at.metric[0].value.replace(",", ""))
    assert 821_557 / 1.5 <= produced <= 821_557 * 1.5  # LinkedIn, 1 producer, no replication
    bottleneck = throughput(Hardware(), Workload()).produce.name  # the page shows the model's own bound
    assert any(f"produce: {bottleneck}" in m.value for m in at.markdown)
    assert not at.error
    # how far to trust it, beside the answer: the published figures held out and the real local cluster's
    assert any(
        "`kobs whatif calibration`" in c.value and "`kobs bench capacity`" in c.value for c in at.caption
    )


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


def lost_brokers(at: AppTest):
    return next(m for m in at.multiselect if m.label == "Brokers that die")


def markdown_after(at: AppTest, prefix: str) -> str:
    return next(m.value for m in at.markdown if m.value.startswith(prefix))


def test_changing_replication_factor_compares_against_linkedins_figure():
    at = run(rf_then=3)
    compare = at.dataframe[COMPARE].value
    then = int(compare.loc["produce records/s", "then"].replace(",", ""))
    assert 786_980 / 1.5 <= then <= 786_980 * 1.5  # LinkedIn, 1 producer, RF 3, acks=1
    # the page compares against the model's answer for the changed workload, not the first one's
    assert (
        compare.loc["bottleneck", "then"] == throughput(Hardware(), Workload(replication_factor=3)).bottleneck
    )


def test_a_bad_change_is_reported_in_its_tab_and_the_other_answers_stand():
    at = run(rf_then=4)
    assert [e.value for e in at.error] == ["replication factor: 4 exceeds the 3 brokers — use at most 3"]
    tables = [d.value for d in at.dataframe]
    assert any("replicas" in t and len(t) == 6 for t in tables)  # the placement tab still answers


def test_sizing_names_disk_as_binding_and_growth_adds_a_broker():
    # docs/capacity.md: disk = W x retention x RF + partitions x RF x 1 GiB, W = 10 MiB/s x 122/100;
    # 7.74 TB over 6 TB per broker at 70 % use -> 2 brokers; +50 % traffic: 11.6 TB -> 3 brokers.
    at = run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Brokers needed now"] == "2" and metrics["After +50 %"] == "3"
    assert markdown_after(at, "**Binding resource**").endswith("now: disk space; after growth: disk space")
    at.number_input(key="ingress").set_value(-5.0).run()
    assert [e.value for e in at.error] == ["ingress mbps: must be greater than 0, got -5.0"]


def test_losing_two_of_three_replicas_blocks_acks_all_producers_only():
    # RF 3, min.insync.replicas 2, two brokers die: every partition keeps one replica, so it is under min
    # ISR but online; acks=all batches are refused and pile up: 32 MiB at 1 MiB/s = 32.0 s.
    at = run(rf=3)
    lost_brokers(at).set_value([0, 1])
    at.number_input(key="min_isr").set_value(2)
    at.selectbox(key="acks").set_value("all").run()
    assert any("Under min ISR: **[0, 1, 2, 3, 4, 5]**" in m.value for m in at.markdown)
    assert "send() blocks after 32.0 s" in markdown_after(at, "<div id='verdict'>")
    at.selectbox(key="acks").set_value("1").run()
    assert "never blocks" in markdown_after(at, "<div id='verdict'>")


def test_broker_failure_names_the_group_members_that_stall():
    # The incident placement: broker 0 holds 0, 3, 6, 9, 12, 15; range assignment of 16 partitions to
    # 4 members gives each 4 consecutive partitions.
    at = run(brokers=3, partitions=16, consumers=4)
    assert markdown_after(at, "**Group members stalled**") == (
        "**Group members stalled** — consumer-0 (partitions 0, 3), consumer-1 (partitions 6), "
        "consumer-2 (partitions 9), consumer-3 (partitions 12, 15)"
    )
    at.number_input(key="rate").set_value(-1.0).run()
    assert [e.value for e in at.error] == [
        "bytes per s: producer producer: MiB/s must not be negative, got -1.0"
    ]


def test_placement_follows_kafkas_worked_example():
    at = run(brokers=5, partitions=10, rf=3)
    table = at.dataframe[PLACEMENT].value.set_index("partition")["replicas"]
    assert {p: table[p] for p in (0, 1, 4, 5, 9)} == {
        0: "0, 1, 2", 1: "1, 2, 3", 4: "4, 0, 1", 5: "0, 2, 3", 9: "4, 1, 2"
    }  # fmt: skip


def test_group_sizing_shows_idle_members_and_the_coordinator_partition():
    at = run(consumers=8)
    assert markdown_after(at, "**Idle members**").startswith("**Idle members** — consumer-6, consumer-7")
    # test_group_1 -> 30 (docs/kafka-behaviour.md)
    assert "partition **30**" in markdown_after(at, "**Coordinator**")


def test_quota_follows_ckafkas_rules_from_each_brokers_inputs():
    # Shares 60/90, 20/90, 10/90: Pmin/Pmax < 0.8, so the busiest gets 100 x 2/3 and the others
    # 100 x min(P + 0.1 x 2/3, 2/3).
    at = run()
    assert markdown_after(at, "**Rule**") == "**Rule** — busiest plus headroom; producing allowed"
    assert markdown_after(at, "**Allocation**") == (
        "**Allocation** — broker 0: 66.7 MB/s, broker 1: 28.9 MB/s, broker 2: 17.8 MB/s"
    )
    at.checkbox(key="storage_full").check().run()
    assert "producing **blocked**" in markdown_after(at, "**Rule**")
    at.checkbox(key="storage_full").uncheck().run()
    for b in (0, 1, 2):  # even traffic: shares within 80 % of each other split the limit in proportion
        at.number_input(key=f"quota_traffic_{b}").set_value(30.0).run()
    assert markdown_after(at, "**Rule**") == "**Rule** — proportional; producing allowed"
    at.number_input(key="quota_count").set_value(4).run()  # a fourth broker, quieter (4 partitions, 10 MB/s)
    assert markdown_after(at, "**Rule**") == "**Rule** — busiest plus headroom; producing allowed"
    for b in range(4):
        at.number_input(key=f"quota_partitions_{b}").set_value(0).run()
    assert [e.value for e in at.error] == [
        "broker: the brokers hold no partitions — give at least one a partition count"
    ]


def use_cluster(
    bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prometheus_url: str | None = None
) -> None:
    """The app's configuration: one cluster ``c1`` at ``bootstrap`` (and the app's Prometheus)."""
    config = tmp_path / "kobs.yaml"
    doc: dict = {"clusters": [{"name": "c1", "bootstrap_servers": [bootstrap]}]}
    if prometheus_url:
        doc["app"] = {"prometheus_url": prometheus_url}
    config.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("KOBS_CONFIG", str(config))


@pytest.mark.peers
def test_broker_failure_against_a_live_topics_placement(kafka_cluster, tmp_path, monkeypatch):
    # Three partitions of replication factor 1 on three brokers, as kafka-topics --describe places them:
    # losing broker 1 (the page's default) takes its partitions offline, and a keyed producer's 1 MiB/s
    # aimed at them piles up in its 32 MiB buffer: with one of three partitions lost, 32 / (1/3) = 96.0 s.
    create_topic(kafka_cluster.bootstrap, "whatif-live", 3)
    placed = kafka_tools.describe_topics(kafka_cluster.bootstrap, topic="whatif-live")
    on_1 = [r.partition for r in placed if r.replicas == (1,)]
    assert len(on_1) == 1  # Kafka spreads three single-replica partitions over three brokers
    use_cluster(kafka_cluster.bootstrap, tmp_path, monkeypatch)
    at = run()
    at.radio(key="source").set_value("of a live topic").run()
    at.selectbox(key="topic").set_value("whatif-live").run()
    assert lost_brokers(at).value == [1]
    assert any(f"Offline partitions: **{on_1}**" in m.value for m in at.markdown)
    assert "send() blocks after 96.0 s" in markdown_after(at, "<div id='verdict'>")


@pytest.mark.peers
def test_the_sidebar_starts_from_a_live_clusters_shape_as_kafka_topics_describes_it(
    kafka_cluster, tmp_path, monkeypatch
):
    create_topic(kafka_cluster.bootstrap, "whatif-shape", 4, replication_factor=3)
    rows = [r for r in kafka_tools.describe_topics(kafka_cluster.bootstrap) if not r.topic.startswith("__")]
    factors = Counter(len(r.replicas) for r in rows)
    use_cluster(kafka_cluster.bootstrap, tmp_path, monkeypatch)
    at = run()
    at.selectbox(key="preset").set_value("live cluster c1").run()
    assert not at.exception and not at.sidebar.error
    assert at.number_input(key="brokers").value == len({b for r in rows for b in r.replicas})
    assert at.number_input(key="partitions").value == len(rows)
    assert at.number_input(key="rf").value == max(factors, key=lambda f: (factors[f], f))
    at.selectbox(key="preset").set_value("LinkedIn's published benchmark (2014)").run()
    assert at.number_input(key="partitions").value == Workload().partitions


def test_an_unreachable_cluster_is_one_message_in_the_failure_tab(tmp_path, monkeypatch):
    address = f"127.0.0.1:{free_port()}"
    use_cluster(address, tmp_path, monkeypatch)
    at = run()
    at.radio(key="source").set_value("of a live topic").run()
    (error,) = at.error
    assert error.value.startswith(f"cluster: c1: no metadata from {address} (")
    assert error.value.endswith("— is the cluster reachable?")


def test_a_clusters_shape_is_its_brokers_partitions_and_most_common_replication_factor():
    placement = {"a": {0: [1, 2, 3], 1: [2, 3, 4]}, "b": {0: [1]}, "c": {0: [5, 1, 2], 1: [4, 5, 1]}}
    assert cluster_shape(placement) == {"brokers": 5, "partitions": 5, "replication_factor": 3}
    with pytest.raises(InputError, match="no topics yet"):
        cluster_shape({})


@pytest.mark.peers
def test_the_sidebar_takes_a_live_clusters_traffic_from_the_jobs_figures_in_prometheus(
    kafka_cluster, tmp_path, monkeypatch
):
    # The jobs' figures for c1 through a real Prometheus: 2 + 1 MiB/s produced to two topics (another
    # cluster's 50 MiB/s left out), and counters growing by 3 MiB and 1,000 messages a second: messages of
    # 3 MiB / 1,000 = 3,146 bytes.
    create_topic(kafka_cluster.bootstrap, "whatif-traffic", 2)  # a cluster with a shape
    started = time.time()
    bytes_in = [({"cluster": "c1", "topic": "a"}, 2 * MIB), ({"cluster": "c1", "topic": "b"}, MIB),
                ({"cluster": "other", "topic": "a"}, 50 * MIB)]  # fmt: skip
    series = {
        "kobs_topic_bytes_in_per_second": bytes_in,
        "kobs_topic_bytes_in_total": [({"cluster": "c1"}, lambda: 3 * MIB * (time.time() - started))],
        "kobs_topic_messages_in_total": [({"cluster": "c1"}, lambda: 1000 * (time.time() - started))],
    }
    with (
        DerivedExporter(series=series) as exporter,
        Prometheus(tmp_path / "prom", {"kobs-exporter": [exporter.address]}) as prom,
    ):
        wait_for(lambda: prom.query(traffic_queries("c1")["messages_in_5m"]), timeout_s=30)
        use_cluster(kafka_cluster.bootstrap, tmp_path, monkeypatch, prometheus_url=prom.url)
        at = run()
        at.selectbox(key="preset").set_value("live cluster c1").run()
    assert not at.exception and not at.sidebar.error, [e.value for e in at.sidebar.error]
    assert at.number_input(key="ingress").value == pytest.approx(3.0)
    # 3,146 within 1 %: the stand-in reads its two counters moments apart within a scrape (7 bytes off, 0.2 %,
    # on a loaded CI machine), and a young series has few samples in the window to average that out
    assert at.number_input(key="message_bytes").value == pytest.approx(3146, rel=0.01)


def test_traffic_is_unknown_while_nothing_is_produced():
    assert traffic_shape(None) == traffic_shape(0.0, 5.0, 1.0) == {}
    assert traffic_shape(MIB, None, None) == {"ingress_mbps": 1.0}  # no messages counted yet: size kept
