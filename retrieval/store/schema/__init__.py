"""The schema: the models (``models``), every table once with what each part of the package needs of it
(``catalogue``), and the packaged Alembic migrations with ``retrieval upgrade`` (``migrate``)."""
