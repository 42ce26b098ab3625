"""Kafka fleet simulator: a seeded, discrete-time model of an N-broker cluster behind real wire formats.

The model (``placement``, ``model``, ``cluster``, ``controller``, ``producer``, ``consumer``,
``notifications``) is pure Python and knows no I/O; ``exporter`` and ``zookeeper`` publish its state the
way a real cluster does; ``scenario`` drives it from data; ``cli`` is ``kobs simulate``.
"""
