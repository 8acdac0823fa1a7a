"""An index on PostgreSQL: connections (``connection``), the build copied in and swapped (``build``), the writers'
transaction (``write``), and an index sharded over several servers (``shards``). Needs psycopg
(``pip install 'retrieval[postgresql]'``)."""
