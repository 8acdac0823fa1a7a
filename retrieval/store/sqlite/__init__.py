"""An index in one SQLite file: the full build (``build``) with its parallel tokenising and sorted load
(``bulk``, ``pages``), the file's locks, temporaries and atomic swap (``files``), and re-indexing an older
tokeniser's text (``reindex``)."""
