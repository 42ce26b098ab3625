"""How every ``kobs`` process logs: one line per record on stderr, library chatter turned down."""

from __future__ import annotations

import logging


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for chatty in ("kazoo.client", "py4j"):  # connection chatter, not news
        logging.getLogger(chatty).setLevel(logging.WARNING)
    logging.getLogger("jmxquery").setLevel(logging.CRITICAL)  # the JMX source reports its failures itself
