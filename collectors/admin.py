"""Admin API plumbing: one client per watched cluster; one metadata request for the sources of a cluster
that ask at the same time."""

from __future__ import annotations

import threading
import time
import weakref
from concurrent.futures import Future
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, TopicMetadata

from common.config import Cluster
from common.kafka_clients import HUNG_BROKER_TIMEOUT_MS, cause, cluster_settings, refusal

# How long an Admin client's metadata request waits for its broker (``socket.timeout.ms``): half of
# HUNG_BROKER_TIMEOUT_MS, a scrape's default timeout. librdkafka sends each metadata request to the broker it
# used last and drops that connection only once a request on it has timed out: with 10 s, a hung broker
# cost the scrape its topic listing (and a second source asking meanwhile, its own), with 5 s the listing
# is asked again of another broker within the scrape (:func:`cluster_view`). Admin operations carry their
# own timeouts.
METADATA_TIMEOUT_MS = HUNG_BROKER_TIMEOUT_MS // 2
# Time for :func:`list_topics` to ask twice: a hung broker until its request times out, then another.
LISTING_TIMEOUT_S = 2 * METADATA_TIMEOUT_MS / 1000 + 1


def admin_settings(cluster: Cluster) -> dict[str, Any]:
    """The settings of the Admin clients of ``cluster``; ``client_properties`` may set
    ``socket.timeout.ms`` (:data:`METADATA_TIMEOUT_MS`)."""
    defaults = {"socket.timeout.ms": METADATA_TIMEOUT_MS, "client.id": f"kobs-{cluster.name}"}
    return defaults | cluster_settings(cluster)


REFUSED = "refused"  # the reason (first word) of a source's error line for a refused listing


class Refused(KafkaException):
    """The cluster refused the login or the certificates: why its listing failed (a ``KafkaException`` of
    ``_AUTHENTICATION``, for every caller that handles Kafka's); ``str()`` names the cause and the
    configuration key to check."""

    def __str__(self) -> str:
        return self.args[0].str()


class _AccessWatch:
    """An Admin client's ``error_cb``: the last refusal (SASL login, TLS handshake) it reported since the
    cluster last answered a listing. librdkafka tells a refusal only there, served by ``poll``; a request
    meanwhile just times out (and while it waits to connect again, without a new refusal)."""

    def __init__(self, where: str):
        self.where = where
        self.refused: KafkaError | None = None

    def __call__(self, error: KafkaError) -> None:
        if refusal(error):
            self.refused = error


_watches: dict[int, _AccessWatch] = {}  # per client made by admin_client


def admin_client(cluster: Cluster) -> AdminClient:
    """The Admin client of ``cluster``'s sources; a listing it fails because the cluster refused the login
    or the certificates raises :class:`Refused` (:func:`list_topics`)."""
    watch = _AccessWatch(f"clusters[{cluster.name}]")
    admin = AdminClient(admin_settings(cluster) | {"error_cb": watch})
    _watches[id(admin)] = watch
    weakref.finalize(admin, _watches.pop, id(admin), None)
    return admin


def listing_error(exc: Exception) -> str:
    """A source's error line for a failed topic listing: ``refused: ...`` or ``list_topics: ...``."""
    return f"{REFUSED}: {exc}" if isinstance(exc, Refused) else f"list_topics: {exc}"


_in_flight: dict[int, Future[ClusterView]] = {}  # per client: the metadata request out
_in_flight_lock = threading.Lock()


class ClusterView(NamedTuple):
    """One metadata answer: the non-internal topics (names starting with ``__`` are Kafka's own) and the
    ids of the brokers the cluster lists (registered and, in KRaft, not fenced)."""

    topics: dict[str, TopicMetadata]
    brokers: frozenset[int]


def cluster_view(admin: AdminClient, timeout_s: float) -> ClusterView:
    """Metadata of every topic and broker, in one metadata request.

    Raises KafkaException when the cluster does not answer. A caller that asks while a request of the same
    client is out gets that request's answer (or exception): the offsets and metadata sources of a
    cluster, due together, send one request of every partition. The answer is shared: read it, do not
    change it.
    """
    with _in_flight_lock:
        flight = _in_flight.get(id(admin))
        joined = flight is not None
        if flight is None:
            flight = _in_flight[id(admin)] = Future()
    if not joined:
        try:
            found = list_topics(admin, timeout_s)
            topics = {name: t for name, t in found.topics.items() if not name.startswith("__")}
            flight.set_result(ClusterView(topics, frozenset(found.brokers)))
        except BaseException as exc:
            flight.set_exception(exc)
        finally:
            with _in_flight_lock:
                del _in_flight[id(admin)]
    try:
        return flight.result(timeout=timeout_s)
    except TimeoutError:  # joined a request that outlasted this caller's timeout
        raise _unanswered(admin, KafkaError(KafkaError._TIMED_OUT, "no metadata answer in time")) from None
    finally:
        # A raised exception's traceback holds this frame; without ``flight`` the frame no longer holds the
        # exception (the future stores it), so no reference cycle keeps ``admin`` and its threads alive.
        del flight


def list_topics(admin: AdminClient, timeout_s: float) -> Any:
    """The metadata of every topic, asked again once when the request timed out (librdkafka then drops
    the connection to the broker it asked, hung most likely, and asks another) and time is left.
    :class:`Refused` when the cluster refused the login or the certificates since it last answered."""
    deadline = time.monotonic() + timeout_s
    watch = _watches.get(id(admin))
    try:
        try:
            found = admin.list_topics(timeout=min(timeout_s, METADATA_TIMEOUT_MS / 1000 + 1))
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._TIMED_OUT or deadline - time.monotonic() < 1:
                raise
            found = admin.list_topics(timeout=deadline - time.monotonic())
    except KafkaException as exc:
        raise _unanswered(admin, exc.args[0]) from None
    if watch is not None:
        admin.poll(0)  # the errors its callback gets queue up until served
        watch.refused = None
    return found


def refusal_text(admin: AdminClient) -> str | None:
    """What the cluster refused ``admin`` (its login or certificates) since it last answered a listing,
    naming the configuration key to check; None when it refused nothing."""
    watch = _watches.get(id(admin))
    if watch is None:
        return None
    admin.poll(0)  # serves the error callback
    return None if watch.refused is None else f"{cause(watch.refused)} — check {watch.where}.security"


def _unanswered(admin: AdminClient, error: KafkaError) -> KafkaException:
    """The exception of a listing that failed with ``error``: :class:`Refused` when the cluster refused the
    login or the certificates since it last answered one."""
    text = refusal_text(admin)
    return Refused(KafkaError(KafkaError._AUTHENTICATION, text)) if text else KafkaException(error)


def topics(admin: AdminClient, timeout_s: float) -> dict[str, TopicMetadata]:
    """Metadata (partitions: leader, replicas, ISR) of every non-internal topic (:func:`cluster_view`)."""
    return cluster_view(admin, timeout_s).topics
