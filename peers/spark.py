"""A Spark standalone cluster from PySpark's own scripts: one master and its workers, on 127.0.0.1.

``bin/spark-class`` of the installed PySpark starts Spark's own ``Master`` and ``Worker`` classes, as
``sbin/start-master.sh`` would; the workers' executors run this interpreter (``PYSPARK_PYTHON``), so they
import the project's packages as ``kobs stream``'s driver does.
"""

from __future__ import annotations

import json
import secrets
import sys
import urllib.request
from pathlib import Path

import pyspark

from peers.process import HOST, ManagedProcess, PeerError, free_port, http_ready

SPARK_HOME = Path(pyspark.__file__).parent


class SparkStandalone:
    """``with SparkStandalone(run_dir, workers=2) as cluster:`` then ``--master cluster.url`` with the
    secret ``cluster.secret``."""

    def __init__(self, run_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        """The master and workers require Spark's RPC authentication with :attr:`secret`, made for the run
        (a driver passes it as ``spark.authenticate.secret``)."""
        self.run_dir = Path(run_dir)
        self.port, self.ui_port = free_port(), free_port()
        self.secret = secrets.token_urlsafe(16)
        self.env = {
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": HOST,
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_DAEMON_JAVA_OPTS": "-Dspark.authenticate=true",
            "_SPARK_AUTH_SECRET": self.secret,  # where Spark's daemons read it, off their command line
        }
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", HOST]
        master += ["--port", str(self.port), "--webui-port", str(self.ui_port)]
        self.master = ManagedProcess(
            "spark-master", master, self.run_dir, http_ready(self._json_url), self.env, 60.0,
            ports=(self.port, self.ui_port),
        )  # fmt: skip
        self.workers = []
        for i in range(1, workers + 1):
            work_dir = self.run_dir / f"worker-{i}"
            argv = [spark_class, "org.apache.spark.deploy.worker.Worker", self.url, "--host", HOST]
            argv += ["--cores", str(cores), "--memory", memory, "--webui-port", str(free_port())]
            argv += ["--work-dir", str(work_dir)]
            self.workers.append(
                ManagedProcess(
                    f"spark-worker-{i}", argv, self.run_dir, lambda n=i: self.alive() >= n, self.env, 60.0
                )
            )

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def _json_url(self) -> str:
        return f"http://{HOST}:{self.ui_port}/json/"

    def alive(self) -> int:
        """Workers the master lists as ALIVE (0 while it does not answer)."""
        try:
            with urllib.request.urlopen(self._json_url, timeout=2) as response:
                state = json.load(response)
        except OSError:
            return 0
        return sum(worker["state"] == "ALIVE" for worker in state["workers"])

    def executor_logs(self) -> list[Path]:
        """The stderr of every executor the workers ran (``<work-dir>/<app>/<executor>/stderr``)."""
        return sorted(
            p
            for w in range(1, len(self.workers) + 1)
            for p in (self.run_dir / f"worker-{w}").glob("app-*/*/stderr")
        )

    def __enter__(self) -> SparkStandalone:
        try:
            self.master.start()
            for worker in self.workers:
                worker.start()
        except PeerError:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        for process in [*self.workers, self.master]:
            process.stop()
