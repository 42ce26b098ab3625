"""An evaluation crosses from the executors to the driver pickled, and rests pickled in the driver's
snapshots: it reads back whole, as the same types, in the form it is stored now and in the one before."""

from __future__ import annotations

import pickle

from spark_jobs import analysis
from spark_jobs.analysis import Derived, Evaluation
from spark_jobs.snapshots import dump_state, load_state

EVALUATION = Evaluation(
    history=[{"cluster": "prod", "topic": "orders", "lag_messages": 7}],
    metrics=[
        Derived("kobs_consumergroup_lag_messages", ("prod", "billing", "orders", "0"), 7.0),
        Derived("kobs_consumergroup_status", ("prod", "billing"), 1.0),
    ],
)


class EvaluationAsStoredBefore:
    """An evaluation as the previous version pickled it (its attributes), under the class's name now."""

    __module__, __qualname__ = Evaluation.__module__, Evaluation.__qualname__

    def __init__(self, evaluation: Evaluation):
        self.history, self.metrics = evaluation.history, evaluation.metrics


def test_an_evaluation_reads_back_whole_with_its_metrics_as_derived_values():
    restored = load_state(dump_state(EVALUATION))
    assert restored == EVALUATION
    assert all(type(d) is Derived for d in restored.metrics)
    assert restored.metrics[1].labels == ("prod", "billing")


def test_an_evaluation_without_metrics_or_history_reads_back():
    assert load_state(dump_state(Evaluation())) == Evaluation()


def test_its_metrics_are_stored_as_three_columns_not_as_an_object_each():
    """Each pickled ``Derived`` would be built on load by a Python call: the columns name the type nowhere."""
    many = Evaluation(
        metrics=[Derived("kobs_partition_current_offset", ("prod", "t", str(p)), p) for p in range(9)]
    )
    assert b"Derived" in pickle.dumps(many.metrics)
    assert b"Derived" not in pickle.dumps(many)
    assert load_state(pickle.dumps(many)) == many


def test_an_evaluation_pickled_by_the_previous_version_reads_back(monkeypatch):
    with monkeypatch.context() as patched:
        patched.setattr(analysis, "Evaluation", EvaluationAsStoredBefore)
        stored = pickle.dumps(EvaluationAsStoredBefore(EVALUATION))
    assert b"lag_messages" in stored
    restored = load_state(stored)
    assert type(restored) is Evaluation
    assert restored == EVALUATION
