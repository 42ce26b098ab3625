# One image for every Python part of Kafka Observatory (collectors, Spark driver, app).
# Spark's Kafka source (pinned in peers/jars/pom.xml) is resolved from Maven Central at build time, in a
# stage of its own, by the same script as scripts/setup.sh: nothing is downloaded when the image runs.
FROM maven:3.9-eclipse-temurin-17 AS jars
WORKDIR /src
COPY peers/jars/pom.xml peers/jars/pom.xml
COPY scripts/jars.sh scripts/jars.sh
RUN KOBS_JARS=/jars scripts/jars.sh spark-kafka

FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/kobs
COPY pyproject.toml README.md ./
COPY common common
COPY collectors collectors
COPY spark_jobs spark_jobs
COPY simulator simulator
COPY dashboards dashboards
COPY app app
COPY alerts alerts
COPY docs/runbooks docs/runbooks
COPY peers peers
COPY kobs kobs
COPY bench bench
RUN pip install --no-cache-dir .
COPY --from=jars /jars /opt/kobs/jars
ENV PYSPARK_PYTHON=python3 KOBS_JARS=/opt/kobs/jars
ENTRYPOINT ["kobs"]
