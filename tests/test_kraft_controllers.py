"""A KRaft cluster in Kafka's production layout, a broker-only node and a dedicated controller (two real
Kafka JVMs), scraped by the collector's own JMX and metadata sources and read by the replication analysis.
Kafka's own word first: ``kafka-metadata-quorum`` names the controller, the Admin API's broker list names
the broker only, and only the controller registers ``kafka.controller`` beans. kobs then counts one active
controller and reports no broker down (it once reported the controller as a down broker, which paged)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from bench.reference import observations
from collectors.scheduler import build_jobs
from common.config import Config
from common.contract import encode, parse
from peers import kafka_tools
from peers.kafka import KafkaCluster
from peers.process import PeerError
from spark_jobs.replication import ReplicationAnalysis

pytestmark = pytest.mark.peers

CONTROLLER_BEANS = "kafka.controller:type=KafkaController,*"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KafkaCluster(tmp_path_factory.mktemp("split"), nodes=1, controllers=1, heap="256m") as running:
        yield running


def test_a_dedicated_controller_counts_once_and_no_broker_is_down(cluster):
    (controller_id,) = cluster.controllers
    assert kafka_tools.quorum_status(cluster.bootstrap)["LeaderId"] == str(controller_id)
    assert set(AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10).brokers) == {1}
    with pytest.raises(PeerError, match="No matched attributes"):  # JmxTool: the broker has no such bean
        kafka_tools.jmx_values(cluster.nodes[1].jmx_address, CONTROLLER_BEANS)
    active = kafka_tools.jmx_values(cluster.controllers[controller_id].jmx_address, CONTROLLER_BEANS)
    assert active["kafka.controller:type=KafkaController,name=ActiveControllerCount:Value"] == 1

    nodes = {**cluster.nodes, **cluster.controllers}
    config = Config.model_validate(
        {
            "clusters": [
                {
                    "name": "split",
                    "bootstrap_servers": [cluster.bootstrap],
                    # as docs/collectors.md says: dedicated controllers listed under jmx, their node id
                    "jmx": [{"broker_id": i, "address": node.jmx_address} for i, node in nodes.items()],
                }
            ],
            "intervals": {"metrics_s": 20},  # each JMX scrape gives up after 16 s (a busy host: seconds)
        }
    )
    jobs = [j for j in build_jobs(config) if j.source.name.startswith(("jmx/", "admin/metadata"))]
    analysis = ReplicationAnalysis(stale_after_s=60, forget_after_s=60)
    for job in jobs:
        scrape = job.source.collect()
        assert not scrape.errors, (job.source.name, scrape.errors)
        analysis.observe(observations(parse(encode(scrape.batch)), analysis.inputs))
    metrics = {(name, labels): value for name, labels, value in analysis.evaluate().metrics}
    assert {labels[1]: v for (name, labels), v in metrics.items() if name == "kobs_broker_up"} == {"1": 1}
    assert metrics["kobs_cluster_active_controllers", ("split",)] == 1
