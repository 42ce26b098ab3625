"""The Java artifacts Kafka Observatory runs, resolved by ``scripts/setup.sh`` from Maven Central.

Their versions live in one place, ``peers/jars/pom.xml`` (one Maven profile per jar set: Kafka's brokers and
tools, the JMX exporter's agent, Spark's Kafka source); setup copies each profile with its runtime
dependencies into ``.cache/jars/<profile>-<version>/`` (``KOBS_JARS`` names another folder, as the image
does), and nothing is downloaded at run time: a missing folder is an error that says to run setup.
"""

from __future__ import annotations

import functools
import os
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POM = ROOT / "peers" / "jars" / "pom.xml"


class MissingJars(RuntimeError):
    """A jar set setup has not resolved (the message names the fix)."""


def cache() -> Path:
    """The folder holding every resolved jar set."""
    return Path(os.environ.get("KOBS_JARS") or ROOT / ".cache" / "jars")


@functools.cache
def version(profile: str) -> str:
    """The pinned version of a jar set (``kafka``, ``spark-kafka``): ``<profile>.version`` in the pom."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    found = ET.parse(POM).getroot().find(f"m:properties/m:{profile}.version", ns)
    if found is None or not (found.text or "").strip():
        raise MissingJars(f"{POM}: no <{profile}.version> property")
    return found.text.strip()


def jar_dir(profile: str) -> Path:
    """The folder holding a jar set; MissingJars naming the fix when setup has not resolved it."""
    folder = cache() / f"{profile}-{version(profile)}"
    if not any(folder.glob("*.jar")):
        raise MissingJars(f"{folder} has no jars: run scripts/setup.sh (it resolves them with mvn)")
    return folder


def jars(profile: str) -> list[Path]:
    """Every jar of a set, in name order."""
    return sorted(jar_dir(profile).glob("*.jar"))
