"""A real Apache Kafka cluster on loopback: N nodes, each its own JVM, from the jars setup resolved.

KRaft by default (``kafka`` jar set): every node is broker and controller, the quorum is the N nodes; with
``controllers=M`` the N nodes are brokers only and M more (ids from 101) are the quorum, controllers only
(Kafka's layout for production clusters).
With ``zookeeper=`` (``host:port/chroot``; Kafka creates the chroot) the cluster runs in ZooKeeper mode
instead (``kafka-zk`` jar set, Kafka 3.9, the last line that has it, logging through reload4j): brokers
register in ZooKeeper, one of them is the controller, and partition states are znodes real brokers write.

Each node gets free ports for its client listener, its controller listener (KRaft), JMX and the Prometheus
JMX exporter's agent (its metrics over HTTP as ``deploy/jmx-exporter-broker.yaml`` names them, the way
Strimzi and Confluent serve a broker's; :attr:`KafkaNode.exporter_url`), a small heap, its log
(``kafka-<id>.log``) and data in the run directory, and settings that make incidents quick to show
(:data:`FAST_INCIDENTS`). Tests and the demo drive it with :meth:`KafkaCluster.kill`, :meth:`pause`
(SIGSTOP: a hung broker), :meth:`resume`, :meth:`restart`, planned work with :meth:`shut_down` (SIGTERM: a
controlled shutdown) and :meth:`start_node`, and read what the cluster itself says with
Kafka's own tools (:mod:`peers.kafka_tools`).

With ``secure=True`` (KRaft only) every node also listens with SASL/SCRAM (``SASL_PLAINTEXT``, mechanisms
SCRAM-SHA-512 and SCRAM-SHA-256), with TLS and client certificates (``SSL``, mutual TLS) and with both
(``SASL_SSL``); certificates come from :mod:`peers.tls`, the SCRAM user is written into the storage at
format time (``kafka-storage format --add-scram``) with a password made for the run. PLAINTEXT stays the
inter-broker and tools' listener.
"""

from __future__ import annotations

import base64
import secrets
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from common import jars
from peers import jvm
from peers.process import HOST, ManagedProcess, PeerError, free_port, tcp_ready
from peers.tls import Pki, make_pki

# Broker settings that make incidents show within seconds instead of the defaults' tens of seconds.
FAST_INCIDENTS = {
    "replica.lag.time.max.ms": 5000,  # a stopped follower leaves the ISR after 5 s (default 30 s)
    "broker.session.timeout.ms": 6000,  # KRaft: the controller fences a silent broker after 6 s (9 s)
    "broker.heartbeat.interval.ms": 1000,
    "zookeeper.session.timeout.ms": 6000,  # ZooKeeper mode: same for the broker's session (18 s)
    "group.initial.rebalance.delay.ms": 0,  # groups form at once (3 s)
}
# Java's first compiler only (C1), unless a cluster is measured: a node's optimizing compiler (C2) spent a
# third of its CPU in its first minutes, on 2 cores shared by the suite's clusters and Spark. Three nodes
# over their start and 150 s of 2,000 records/s used 25.8 and 25.9 CPU seconds with C1 alone, 38.1 and 36.5
# with both, and started in 7.2 and 7.5 s against 12.2 and 10.7 s (/proc/PID/stat, AMD EPYC, 2026-12-07).
QUICK_JIT = ("-XX:TieredStopAtLevel=1",)
# A small footprint, so that three nodes, Spark and the rest share two cores and a few GB.
SMALL = {"num.network.threads": 2, "num.io.threads": 2, "background.threads": 2, "log.cleaner.threads": 1}
LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = warn
"""
LOG4J1 = """\
log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
"""


SECURE_LISTENERS = ("SASL_PLAINTEXT", "SSL", "SASL_SSL")  # listener name = its security protocol
SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
SCRAM_USER = "kobs"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def security_properties(pki: Pki) -> dict[str, object]:
    """Broker settings of the secure listeners: SCRAM on the SASL ones, the PEM keystore and truststore,
    client certificates required on ``SSL`` (on ``SASL_SSL`` the SCRAM login identifies the client)."""
    props: dict[str, object] = {
        "sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.server_keystore,
        "ssl.key.password": pki.key_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
        "listener.name.ssl.ssl.client.auth": "required",
        "inter.broker.listener.name": "PLAINTEXT",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        for mechanism in SCRAM_MECHANISMS:
            props[f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"] = SCRAM_LOGIN
    return props


def render(properties: Mapping[str, object]) -> str:
    """``key=value`` lines of a Java properties file."""
    return "".join(f"{key}={value}\n" for key, value in properties.items())


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64 without padding, as ``kafka-storage`` makes;
    like Kafka's ``Uuid.randomUuid``, never one starting with ``-`` (command lines take it for an option)."""
    while (found := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return found


class KafkaNode(ManagedProcess):
    """One broker JVM (broker and controller in KRaft mode). Ready once its own metadata lists it."""

    def __init__(
        self,
        node_id: int,
        run_dir: Path,
        properties: Mapping[str, object],
        profile: str,
        port: int,
        jmx_port: int,
        other_ports: tuple[int, ...] = (),
        heap: str = "384m",
        secure_ports: Mapping[str, int] | None = None,
        full_jit: bool = False,
        log_dirs: int = 1,
    ):
        self.node_id, self.port, self.jmx_port, self.profile = node_id, port, jmx_port, profile
        self.exporter_port = free_port()
        self.heap = heap  # -Xmx
        self.secure_ports = dict(secure_ports or {})  # secure listener name -> port (secure clusters)
        self.data_dir = Path(run_dir) / f"kafka-{node_id}-data"  # the first log dir; the metadata log's
        # further log dirs (JBOD): a test can fail one while the node keeps running on the first
        self.log_dirs = (self.data_dir, *(Path(f"{self.data_dir}-{n}") for n in range(2, log_dirs + 1)))
        self.config_path = Path(run_dir) / f"kafka-{node_id}.properties"
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(render({**properties, "log.dirs": ",".join(map(str, self.log_dirs))}))
        if profile == "kafka-zk":
            log_config = Path(run_dir) / "log4j.properties"
            log_config.write_text(LOG4J1)
            logging = [f"-Dlog4j.configuration=file:{log_config}"]
        else:
            log_config = Path(run_dir) / "log4j2.properties"
            log_config.write_text(LOG4J2)
            logging = [f"-Dlog4j2.configurationFile={log_config}"]
        argv = [
            "java", f"-Xmx{heap}", "-Xms64m", "-XX:+UseSerialGC", *(() if full_jit else QUICK_JIT),
            "-Djava.awt.headless=true",
            *logging, *jvm.jmx_flags(jmx_port),
            jvm.exporter_agent(self.exporter_port, "jmx-exporter-broker.yaml"),
            "-cp", jvm.classpath(profile), "kafka.Kafka", str(self.config_path),
        ]  # fmt: skip
        super().__init__(
            f"kafka-{node_id}",
            argv,
            run_dir,
            self._ready,
            start_timeout_s=180,  # a loaded 2-core CI run took 44 s to start a restarted node's controller
            ports=(port, jmx_port, self.exporter_port, *other_ports),
        )

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def jmx_address(self) -> str:
        return f"{HOST}:{self.jmx_port}"

    @property
    def exporter_address(self) -> str:
        """host:port of the JMX exporter's Java agent (a Prometheus scrape target)."""
        return f"{HOST}:{self.exporter_port}"

    @property
    def exporter_url(self) -> str:
        """Its metrics in the Prometheus format, served by the JMX exporter's Java agent."""
        return f"http://{self.exporter_address}/metrics"

    def _ready(self) -> bool:
        """The node answers a metadata request that lists itself (registered and not fenced)."""
        if not tcp_ready(self.port)():
            return False
        try:
            metadata = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=2)
        except Exception:  # KafkaException while the node is still joining
            return False
        return self.node_id in metadata.brokers


class KafkaController(KafkaNode):
    """A dedicated KRaft controller: no client listener (``port`` is its controller listener's), ready once
    that accepts connections."""

    def __init__(
        self,
        node_id: int,
        run_dir: Path,
        voters: str,
        port: int,
        jmx_port: int,
        settings: Mapping,
        heap: str,
        full_jit: bool,
    ):
        properties = {
            **settings,  # the cluster's: the controller fences brokers after broker.session.timeout.ms
            "process.roles": "controller",
            "node.id": node_id,
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": f"CONTROLLER://{HOST}:{port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        }
        super().__init__(node_id, run_dir, properties, "kafka", port, jmx_port, heap=heap, full_jit=full_jit)

    def _ready(self) -> bool:
        return tcp_ready(self.port)()


class KafkaCluster:
    """N real Kafka nodes on 127.0.0.1. ``start()`` formats (KRaft), launches every node, waits for all."""

    def __init__(
        self,
        run_dir: Path,
        nodes: int = 3,
        zookeeper: str | None = None,
        settings: Mapping[str, object] | None = None,
        heap: str = "384m",
        secure: bool = False,
        controllers: int = 0,
        full_jit: bool = False,
        log_dirs: int = 1,
    ):
        """``secure``: also the SASL/SCRAM, TLS and SASL+TLS listeners (KRaft only; see the module);
        ``controllers``: that many dedicated controller nodes (plain KRaft only), 0 for combined nodes;
        ``full_jit``: both of Java's compilers (:data:`QUICK_JIT`), for a cluster whose cost is measured;
        ``log_dirs``: log directories per node (``KafkaNode.log_dirs``; the metadata log is in the first)."""
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        if secure and zookeeper:
            raise ValueError("secure listeners are made for KRaft clusters only (SCRAM users at format time)")
        if controllers and (secure or zookeeper):
            raise ValueError("dedicated controllers are made for plain KRaft clusters only")
        self.run_dir = Path(run_dir)
        self.secure = secure
        self.pki: Pki | None = make_pki(self.run_dir / "tls") if secure else None
        self.scram_user = SCRAM_USER
        self.scram_password = secrets.token_urlsafe(12) if secure else None
        self.zookeeper = zookeeper
        self.profile = "kafka-zk" if zookeeper else "kafka"
        self.version = jars.version(self.profile)
        self.cluster_id = new_cluster_id()
        replicas = min(3, nodes)
        self.settings = base = {
            **SMALL,
            **FAST_INCIDENTS,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min(2, replicas),
            **(settings or {}),
        }
        ids = range(1, nodes + 1)
        ports = {i: (free_port(), free_port(), free_port()) for i in ids}  # client, controller, JMX
        secure_ports = {i: {name: free_port() for name in SECURE_LISTENERS} if secure else {} for i in ids}
        dedicated = {i: (free_port(), free_port()) for i in range(101, 101 + controllers)}  # controller, JMX
        quorum = {i: port for i, (port, _) in dedicated.items()} or {i: ports[i][1] for i in ids}
        voters = ",".join(f"{i}@{HOST}:{port}" for i, port in quorum.items())
        self.controllers = {
            i: KafkaController(i, self.run_dir, voters, port, jmx, base, heap, full_jit)
            for i, (port, jmx) in dedicated.items()
        }  # dedicated controllers; combined nodes are in ``nodes``
        self.nodes: dict[int, KafkaNode] = {}
        self.paused: set[int] = set()
        self.down: set[int] = set()  # stopped or killed on purpose, not yet started again
        for i in ids:
            client, controller, jmx = ports[i]
            if zookeeper:
                props = {
                    "broker.id": i,
                    "zookeeper.connect": zookeeper,
                    "listeners": f"PLAINTEXT://{HOST}:{client}",
                    # a stopping broker asks the controller once to move its leaders, not 3 times 5 s apart
                    # (the last broker standing otherwise spends 10 s asking before it stops)
                    "controlled.shutdown.max.retries": 1,
                }
                other: tuple[int, ...] = ()
            else:
                secured = "".join(f",{name}://{HOST}:{port}" for name, port in secure_ports[i].items())
                protocols = "".join(f",{name}:{name}" for name in secure_ports[i])
                own_controller = "" if controllers else f",CONTROLLER://{HOST}:{controller}"
                props = {
                    "process.roles": "broker" if controllers else "broker,controller",
                    "node.id": i,
                    "controller.quorum.voters": voters,
                    "controller.listener.names": "CONTROLLER",
                    "listeners": f"PLAINTEXT://{HOST}:{client}{own_controller}{secured}",
                    "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT{protocols}",
                }
                props["advertised.listeners"] = f"PLAINTEXT://{HOST}:{client}{secured}"
                other = () if controllers else (controller, *secure_ports[i].values())
                if self.pki is not None:
                    props.update(security_properties(self.pki))
            props.setdefault("advertised.listeners", f"PLAINTEXT://{HOST}:{client}")
            props.update(base)
            self.nodes[i] = KafkaNode(
                i, self.run_dir, props, self.profile, client, jmx, other, heap, secure_ports[i], full_jit,
                log_dirs,
            )  # fmt: skip

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes.values())

    def listener_bootstrap(self, listener: str) -> str:
        """The address list of one secure listener (``SASL_PLAINTEXT``, ``SSL``, ``SASL_SSL``)."""
        if not self.secure:
            raise PeerError("this cluster has no secure listeners: start it with secure=True")
        return ",".join(f"{HOST}:{node.secure_ports[listener]}" for node in self.nodes.values())

    @property
    def sasl_bootstrap(self) -> str:
        """SASL/SCRAM without TLS: log in as :attr:`scram_user` with :attr:`scram_password`."""
        return self.listener_bootstrap("SASL_PLAINTEXT")

    @property
    def ssl_bootstrap(self) -> str:
        """Mutual TLS: trust :attr:`pki` ``.ca``, present ``pki.client_cert`` and ``pki.client_key``."""
        return self.listener_bootstrap("SSL")

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """SASL/SCRAM over TLS: trust ``pki.ca``, log in as :attr:`scram_user`."""
        return self.listener_bootstrap("SASL_SSL")

    @property
    def live_bootstrap(self) -> str:
        """The nodes neither killed nor paused: a tool bootstrapping from a paused node waits 30 s."""
        live = [n for i, n in self.nodes.items() if n.running and i not in self.paused]
        return ",".join(node.bootstrap for node in live)

    def start(self, progress: Callable[[str], None] = lambda _step: None) -> KafkaCluster:
        if not self.zookeeper:
            self._format()
        dedicated = f" and {len(self.controllers)} controllers" if self.controllers else ""
        progress(f"starting Apache Kafka {self.version}: {len(self.nodes)} nodes{dedicated} ...")
        try:
            for node in self._every_node():
                node.launch()
            for node in self._every_node():
                node.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _format(self) -> None:
        """Write each node's KRaft storage metadata (``kafka-storage format``), all nodes at once."""
        runs = []
        for node in self._every_node():
            if (node.data_dir / "meta.properties").exists():
                continue
            argv = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", jvm.classpath(self.profile)]
            argv += ["kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(node.config_path)]
            for mechanism in SCRAM_MECHANISMS if self.secure else ():
                argv += [
                    "--add-scram",
                    f"{mechanism}=[name={self.scram_user},password={self.scram_password}]",
                ]
            runs.append((node, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
        for node, run in runs:
            output = run.communicate(timeout=120)[0].decode(errors="replace")
            if run.returncode != 0:
                raise PeerError(f"kafka-storage format of node {node.node_id} failed: {output.strip()}")

    # Incident controls: each takes a node id.
    def kill(self, node_id: int) -> None:
        """SIGKILL: the broker dies without a controlled shutdown, as in a crash."""
        node = self.nodes[node_id]
        self.down.add(node_id)
        node.send_signal(signal.SIGKILL)
        node.stop()

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the JVM hangs with its sockets open (a long GC pause, a stuck disk)."""
        self.nodes[node_id].send_signal(signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        self.nodes[node_id].send_signal(signal.SIGCONT)
        self.paused.discard(node_id)

    def shut_down(self, node_id: int, timeout_s: float = 60.0) -> None:
        """SIGTERM, and wait for the exit: a controlled shutdown, as ``kafka-server-stop.sh`` or ``systemctl
        stop`` does (the broker moves its leaders away first; SIGKILL only after ``timeout_s``)."""
        self.down.add(node_id)
        self.nodes[node_id].stop(timeout_s)

    def start_node(self, node_id: int, attempts: int = 3) -> None:
        """Start a node that was shut down or killed, on the same ports and data; wait until it is ready. A
        start that fails is tried again, up to ``attempts`` in all, as systemd's ``Restart=on-failure``
        would: on a loaded 2-core machine a restarting node ended itself, or hung past its start timeout, on
        "Unhandled fault in MetadataLoader#handleCommit" (a ClosedChannelException reading its metadata
        log)."""
        for attempt in range(1, attempts + 1):
            try:
                self.nodes[node_id].start()
                break
            except PeerError:
                if attempt == attempts:
                    raise
        self.down.discard(node_id)

    def restart(self, node_id: int) -> None:
        """Start a killed or stopped node again on the same ports and data."""
        node = self.nodes[node_id]
        node.stop()
        self.paused.discard(node_id)
        self.start_node(node_id)

    def revive(self) -> list[tuple[int, int | None]]:
        """Start again (:meth:`start_node`) every node that exited on its own, not stopped or killed here:
        Kafka ends itself on a fault it cannot handle, also after it was ready (the fault above, 50 s after
        a restart). Returns (node, exit code) of each."""
        revived = []
        for node_id, node in self.nodes.items():
            if node_id not in self.down and node.pid is not None and not node.running:
                revived.append((node_id, node.returncode))
                node.stop()
                self.start_node(node_id)
        return revived

    def stop(self) -> None:
        """Ends every node; all are told at once, since a KRaft node shutting down waits for the quorum
        (dedicated controllers after the brokers, whose controlled shutdown asks them)."""
        for group in (self.nodes.values(), self.controllers.values()):
            for node in group:
                node.send_signal(signal.SIGTERM)
            for node in group:
                node.stop()

    def _every_node(self) -> list[KafkaNode]:
        return [*self.controllers.values(), *self.nodes.values()]

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class Reached:
    """Where a benchmark reaches a cluster: its bootstrap servers, and its brokers' metrics URLs (the JMX
    exporter's agent; empty when not known)."""

    bootstrap: str
    exporter_urls: tuple[str, ...] = ()


@contextmanager
def given_or_started(
    bootstrap: str | None, run_dir: Path, nodes: int, exporter_urls: tuple[str, ...] = ()
) -> Iterator[Reached]:
    """``bootstrap`` (and the ``exporter_urls`` given with it) when one is given, else those of a cluster of
    ``nodes`` started in ``run_dir`` for the block (a benchmark's ``--bootstrap``), with both of Java's
    compilers, as production brokers run."""
    if bootstrap:
        yield Reached(bootstrap, exporter_urls)
        return
    with KafkaCluster(run_dir / "kafka", nodes=nodes, full_jit=True) as cluster:
        yield Reached(cluster.bootstrap, tuple(node.exporter_url for node in cluster.nodes.values()))
