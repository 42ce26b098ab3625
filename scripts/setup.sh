#!/usr/bin/env bash
# Installs what Kafka Observatory needs on a Debian machine: system packages (as root) and a
# virtual environment with the Python dependencies. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv

# Debian package -> a file that proves it is installed.
declare -A DEBS=(
  [openjdk-17-jdk-headless]=/usr/bin/javac
  [maven]=/usr/bin/mvn
  [zookeeper]=/usr/share/java/zookeeper.jar
  [prometheus]=/usr/bin/promtool
  [prometheus-alertmanager]=/usr/bin/prometheus-alertmanager
  [prometheus-pushgateway]=/usr/bin/prometheus-pushgateway
  [chromium]=/usr/bin/chromium
  [docker-compose]=/usr/bin/docker-compose
)

missing=()
for pkg in "${!DEBS[@]}"; do
  [ -e "${DEBS[$pkg]}" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: install them with: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

"$PYTHON" - <<'PY' || { echo "setup: Python >= 3.11 is required (found $($PYTHON --version 2>&1))" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

[ -x "$VENV/bin/python" ] || { echo "setup: creating $VENV"; "$PYTHON" -m venv "$VENV"; }
stamp="$VENV/.installed"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python dependencies into $VENV (first run downloads ~600 MB, mostly PySpark)"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e ".[dev]"
  echo "$want" > "$stamp"
fi
# Java artifacts (Apache Kafka, Spark's Kafka source, ...): versions pinned in peers/jars/pom.xml, each set
# copied with its runtime dependencies into .cache/jars/<profile>-<version>/ (git-ignored).
scripts/jars.sh kafka kafka-zk jmx-exporter spark-kafka

echo "setup: ready ($VENV, Java $(java -version 2>&1 | head -n1 | cut -d'"' -f2))"
