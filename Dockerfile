# One image for every Python part of Kafka Observatory (collectors, Spark driver, app).
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
COPY peers peers
COPY kobs kobs
COPY bench bench
RUN pip install --no-cache-dir .
ENV PYSPARK_PYTHON=python3
ENTRYPOINT ["kobs"]
