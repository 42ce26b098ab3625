"""Run by ``test_stream_restart`` in a process of its own: ``kobs stream``'s query stopped while its first
batch's Spark job runs, with no grace for it (the path of a batch longer than ``BATCH_GRACE_S``).

Usage: python tests/stop_mid_batch.py CONFIG_FILE; exits with ``run_stream``'s code.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import suppress

from pyspark import SparkContext

from common.config import load_config
from spark_jobs import stream


def stop_once_a_job_runs(stop: threading.Event) -> None:
    while not stop.is_set():
        context = SparkContext._active_spark_context
        with suppress(AttributeError):  # a context still starting has no Java side yet
            if context is not None and context.statusTracker().getActiveJobsIds():
                stop.set()
        time.sleep(0.01)


def main(config_file: str) -> int:
    stream.BATCH_GRACE_S = 0.0
    stream.STOP_POLL_S = 0.01
    stop = threading.Event()
    threading.Thread(target=stop_once_a_job_runs, args=(stop,), daemon=True).start()
    return stream.run_stream(load_config(config_file), "local[2]", None, False, stop=stop)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
