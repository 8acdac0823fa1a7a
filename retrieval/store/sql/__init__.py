"""The statements written once with each dialect's fragments (``dialect``), and the executor every read runs
through: the tracer, the read snapshot, a sharded index's scattered statements (``executor``)."""
