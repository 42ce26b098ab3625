"""An analysis fed both ways the pipeline feeds it: one observation per sample (the one-process reference)
and, for its ``chunked`` sample names, one ``Samples`` per scrape (the streaming query)."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

import pytest

from spark_jobs.analysis import Observation, Samples, label_columns


def in_chunks(observations: Iterable[Observation], chunked: frozenset[str]) -> list[Observation | Samples]:
    """Each run of samples of one ``chunked`` name from one scrape (cluster, source, time) as one
    ``Samples``; the rest as they are."""
    fed: list[Observation | Samples] = []
    runs = groupby(observations, key=lambda o: (o.name, o.cluster, o.source, o.t_s, o.event is None))
    for (name, cluster, source, t_s, sample), run in runs:
        run = list(run)
        if sample and name in chunked:
            labels = label_columns([o.labels for o in run])
            fed.append(Samples(name, cluster, source, labels, t_s, [o.value for o in run]))
        else:
            fed += run
    return fed


def fed_both_ways(analysis_class: type):
    """A module's autouse fixture: each of its tests runs with observations one by one, then in chunks."""

    @pytest.fixture(autouse=True, params=["one by one", "in chunks"])
    def fed(request, monkeypatch):
        if request.param == "in chunks":
            observe = analysis_class.observe
            chunked = analysis_class.chunked
            assert chunked, f"{analysis_class.__name__} takes no sample name in chunks"
            monkeypatch.setattr(
                analysis_class, "observe", lambda self, obs: observe(self, in_chunks(obs, chunked))
            )
        return request.param

    return fed
