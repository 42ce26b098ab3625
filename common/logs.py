"""How every ``kobs`` process logs: one line per record on stderr, library chatter turned down."""

from __future__ import annotations

import logging

# How py4j begins its log of an exception raised in a Python callback from Spark's JVM.
PY4J_PROXY_ERROR = "There was an exception while executing the Python Proxy"


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for chatty in ("kazoo.client", "py4j"):  # connection chatter, not news
        logging.getLogger(chatty).setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_not_py4j_on_root)
        handler.addFilter(_not_py4j_proxy_error)
    logging.getLogger("jmxquery").setLevel(logging.CRITICAL)  # the JMX source reports its failures itself


def _not_py4j_on_root(record: logging.LogRecord) -> bool:
    """py4j logs a lost connection to Spark's JVM (a stop, a JVM gone) on the root logger, traceback and
    all, at INFO: chatter like the rest of py4j's, whose own logger is turned down above."""
    return not (record.name == "root" and "py4j" in record.pathname and record.levelno < logging.WARNING)


def _not_py4j_proxy_error(record: logging.LogRecord) -> bool:
    """py4j logs an exception raised in a Python callback from Spark's JVM (``kobs stream``'s foreachBatch),
    with its traceback and the Java stack inside it: hundreds of lines. Spark raises it again as the query's
    failure, which ``kobs stream`` logs in one line with the error that failed the batch."""
    return not (record.name == "py4j.clientserver" and record.getMessage().startswith(PY4J_PROXY_ERROR))
