"""What every Java peer shares: the jar sets ``scripts/setup.sh`` resolved from Maven Central
(``common.jars``), JMX flags and the Prometheus JMX exporter's agent."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from common import jars
from peers.process import HOST, PeerError


def jar_dir(profile: str) -> Path:
    """The folder holding a jar set; PeerError naming the fix when setup has not resolved it."""
    try:
        return jars.jar_dir(profile)
    except jars.MissingJars as exc:
        raise PeerError(str(exc)) from None


def classpath(profile: str) -> str:
    """A ``-cp`` value with every jar of the set (Java expands the ``*``)."""
    return f"{jar_dir(profile)}/*"


def jmx_password_files(folder: Path, credentials: tuple[str, str]) -> tuple[Path, Path]:
    """``jmxremote.password`` and ``jmxremote.access`` in ``folder`` for one read-only user (``credentials``
    is user and password), mode 0600: the JVM refuses a password file that others can read."""
    user, password = credentials
    files = (folder / "jmxremote.password", folder / "jmxremote.access")
    folder.mkdir(parents=True, exist_ok=True)
    for path, line in zip(files, (f"{user} {password}\n", f"{user} readonly\n"), strict=True):
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text(line)
    return files


def jmx_flags(port: int, auth: tuple[Path, Path] | None = None) -> list[str]:
    """JVM flags that open a JMX/RMI endpoint on 127.0.0.1:``port`` only, without SSL; unauthenticated, or
    with ``auth`` (the password and access files of :func:`jmx_password_files`) requiring that login. The
    endpoint is :data:`LOOPBACK_JMX`'s agent: the JDK's own (``com.sun.management.jmxremote.port``) also
    opens a local connector on an ephemeral port of every address, which no property moves."""
    login = f",{auth[0]},{auth[1]}" if auth else ""
    return [f"-Djava.rmi.server.hostname={HOST}", f"-javaagent:{loopback_jmx_agent()}={port}{login}"]


LOOPBACK_JMX = Path(__file__).with_name("LoopbackJmx.java")


def loopback_jmx_agent() -> Path:
    """The agent jar of :data:`LOOPBACK_JMX`, built at first use beside its compiled classes."""
    classes = compiled(LOOPBACK_JMX)
    jar = classes / "loopback-jmx.jar"
    if not jar.exists():
        partial = classes / f".loopback-jmx-{os.getpid()}.jar"
        with zipfile.ZipFile(partial, "w") as built:
            built.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nPremain-Class: LoopbackJmx\n")
            for part in classes.glob("*.class"):
                built.write(part, part.name)
        os.replace(partial, jar)  # atomic: a concurrent build of the same jar may have won
    return jar


DEPLOY = Path(__file__).resolve().parent.parent / "deploy"  # the exporter rules files


def exporter_agent(port: int, rules: str) -> str:
    """The JVM flag that loads the Prometheus JMX exporter's Java agent, serving the beans the rules file
    ``deploy/<rules>`` names (and the JVM's own metrics) at ``http://127.0.0.1:port/metrics``."""
    agent = next(jar_dir("jmx-exporter").glob("jmx_prometheus_javaagent-*.jar"))
    return f"-javaagent:{agent}={HOST}:{port}:{DEPLOY / rules}"


def compiled(source: Path, profile: str | None = None) -> Path:
    """The directory holding the classes of one Java ``source`` file (against the jar set ``profile``),
    compiled with the local ``javac`` at first use into a cache keyed by the source's and jars' identity."""
    cp = classpath(profile) if profile else ""
    digest = hashlib.sha256(source.read_bytes() + cp.encode()).hexdigest()[:16]
    cache = jars.cache().parent / "classes" / f"{source.stem}-{digest}"
    if not (cache / f"{source.stem}.class").exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        build = tempfile.mkdtemp(dir=cache.parent)
        argv = ["javac", "-d", build, *(["-cp", cp] if cp else []), str(source)]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(build)
            raise PeerError(f"javac {source.name} failed: {done.stderr.strip()}")
        try:
            os.rename(build, cache)  # atomic; a concurrent compile of the same source may have won
        except OSError:
            shutil.rmtree(build)
    return cache
