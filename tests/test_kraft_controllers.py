"""A KRaft cluster in Kafka's production layout, a broker-only node and a dedicated controller (two real
Kafka JVMs), scraped by the collector's own JMX and metadata sources and read by the replication analysis.
Kafka's own word first: ``kafka-metadata-quorum`` names the controller, the Admin API's broker list names
the broker only, and only the controller registers ``kafka.controller`` beans. kobs then counts one active
controller and reports no broker down (it once reported the controller as a down broker, which paged).
And on the session's 3-node cluster (combined nodes), the handover a CI run paged "0 active controllers"
for: the active controller hangs and is fenced before its successor's JMX is read again, and the quorum
analysis names the leader ``kafka-metadata-quorum`` names, before and after the move."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient

from bench.reference import observations
from collectors.scheduler import build_jobs
from common.config import Config
from common.contract import encode, parse
from peers import kafka_tools
from peers.kafka import KafkaCluster
from peers.process import PeerError
from spark_jobs.quorum import QuorumAnalysis
from spark_jobs.replication import ReplicationAnalysis

pytestmark = pytest.mark.peers

CONTROLLER_BEANS = "kafka.controller:type=KafkaController,*"
ACTIVE = "kafka.controller:type=KafkaController,name=ActiveControllerCount"


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
    assert active[f"{ACTIVE}:Value"] == 1

    # as docs/collectors.md says: dedicated controllers listed under jmx, their node id as broker_id
    jobs = _jobs(cluster.bootstrap, {**cluster.nodes, **cluster.controllers})
    analysis = ReplicationAnalysis(stale_after_s=60, forget_after_s=60)
    quorum = QuorumAnalysis(stale_s=60)
    assert not _feed(jobs.values(), analysis, quorum)
    assert _metrics(analysis, "kobs_broker_up") == {"1": 1}
    assert _metrics(analysis, "kobs_cluster_active_controllers") == {"": 1}
    # the broker-only node observes the quorum; the controller is its one voter and leader
    assert _metrics(quorum, "kobs_quorum_leader") == {"": controller_id}
    assert _metrics(quorum, "kobs_quorum_voters") == {"": 1}
    assert _metrics(quorum, "kobs_quorum_leaderless_seconds") == {"": 0}


def test_a_hung_controller_fenced_before_its_successor_is_read_again_is_no_zero(kafka_cluster):
    leader = int(kafka_tools.quorum_status(kafka_cluster.bootstrap)["LeaderId"])
    others = [i for i in kafka_cluster.nodes if i != leader]
    others_bootstrap = ",".join(kafka_cluster.nodes[i].bootstrap for i in others)
    jobs = _jobs(others_bootstrap, kafka_cluster.nodes)
    metadata, jmx = jobs.pop("admin/metadata"), jobs
    # readings stay recent through the slowest scrapes of a busy machine (the metadata scrape waits out the
    # hung node's requests), so the 0s read before the pause are what the analysis has when the fence shows
    analysis = ReplicationAnalysis(stale_after_s=300, forget_after_s=300)
    quorum = QuorumAnalysis(stale_s=300)
    assert not _feed([metadata, *jmx.values()], analysis, quorum)
    assert _metrics(analysis, "kobs_cluster_active_controllers") == {"": 1}
    assert _metrics(quorum, "kobs_quorum_leader") == {"": leader}
    kafka_cluster.pause(leader)  # SIGSTOP: the quorum elects another leader within seconds
    try:
        # Kafka fences the hung node after broker.session.timeout.ms (6 s here): the broker list drops it.
        # The others' JMX was last read before the pause, each 0 then: no evidence that none leads now.
        # (Meanwhile the metadata scrape's questions to the hung node time out, each an error of its own.)
        deadline = time.monotonic() + 60
        while _metrics(analysis, "kobs_broker_up").get(str(leader)) != 0 and time.monotonic() < deadline:
            time.sleep(1)
            _feed([metadata], analysis, quorum)
        assert _metrics(analysis, "kobs_broker_up")[str(leader)] == 0
        assert _metrics(analysis, "kobs_cluster_active_controllers") == {}  # unknown: no page, where 0 paged
        # Kafka's own JMX (JmxTool): one of the others leads by now; its next scrape reads 1
        leads = [
            kafka_tools.jmx_values(kafka_cluster.nodes[i].jmx_address, ACTIVE)[f"{ACTIVE}:Value"]
            for i in others
        ]
        assert sorted(leads) == [0, 1]
        assert not _feed([jmx[f"jmx/broker-{i}"] for i in others], analysis, quorum)
        assert _metrics(analysis, "kobs_cluster_active_controllers") == {"": 1}
        # the quorum moved: kobs names the leader kafka-metadata-quorum names (asked of the others),
        # though the hung node's last reading, still recent, calls itself leader at the old epoch
        successor = int(kafka_tools.quorum_status(others_bootstrap)["LeaderId"])
        assert successor in others
        assert _metrics(quorum, "kobs_quorum_leader") == {"": successor}
        assert _metrics(quorum, "kobs_quorum_leaderless_seconds") == {"": 0}
    finally:
        kafka_cluster.resume(leader)
    kafka_cluster.nodes[leader].wait_ready()  # listed again, unfenced
    _feed([metadata, *jmx.values()], analysis, quorum)
    assert _metrics(analysis, "kobs_cluster_active_controllers") == {"": 1}


def _jobs(bootstrap: str, nodes: dict) -> dict:
    """The collector's metadata and JMX sources for ``nodes`` (each a ``KafkaNode``), by source name."""
    config = Config.model_validate(
        {
            "clusters": [
                {
                    "name": "c",
                    "bootstrap_servers": [bootstrap],
                    "jmx": [{"broker_id": i, "address": node.jmx_address} for i, node in nodes.items()],
                }
            ],
            "intervals": {"metrics_s": 20},  # each JMX scrape gives up after 16 s (a busy host: seconds)
        }
    )
    return {
        j.source.name: j for j in build_jobs(config) if j.source.name.startswith(("jmx/", "admin/metadata"))
    }


def _feed(jobs, *analyses) -> list[str]:
    """One scrape of each job, through the wire format, into the analyses; the scrapes' errors."""
    errors = []
    for job in jobs:
        scrape = job.source.collect()
        errors += [f"{job.source.name}: {error}" for error in scrape.errors]
        batch = parse(encode(scrape.batch))
        for analysis in analyses:
            analysis.observe(observations(batch, analysis.inputs))
    return errors


def _metrics(analysis: ReplicationAnalysis | QuorumAnalysis, name: str) -> dict[str, float]:
    """The analysis's series ``name`` of cluster ``c`` by their second label ("" for a cluster's own)."""
    found = analysis.evaluate().metrics
    return {(labels[1:] or ("",))[0]: value for metric, labels, value in found if metric == name}
