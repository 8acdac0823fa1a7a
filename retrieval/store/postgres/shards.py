"""An index sharded across PostgreSQL servers: declarative hash partitioning whose partitions are ``postgres_fdw``
foreign tables on the shards, behind one coordinator that every command talks to.

**Document partitioning.** Every row of a paper lives on one shard's partition of its table, and every shard holds
a slice of every posting list. A query's lexical pass then reads, per shard, only the postings of its own terms,
and the coordinator adds up exact scores (a paper's score is a sum over its own postings, all on one shard);
an add writes each paper's rows to one shard; a remove deletes on the shards the papers live on. Term
partitioning would instead send every posting of a query term to the coordinator from the one shard that owns
the term (the long lists of common words from one server), put a paper's postings on as many shards as it has
distinct words (an add writes to all of them), and leave the busiest terms' shards hot.

**The layout** (the distribution column of each table, as Citus would name it):

==================  ============================  ==========================================================
table               where                          key
==================  ============================  ==========================================================
``papers``          distributed                    ``id``
``paper_authors``   distributed, with ``papers``   ``paper_id``
``field_sources``   distributed, with ``papers``   ``paper_id``
``citation_links``  distributed                    ``citing_key`` (a paper's reference list is on one shard)
``cited_counts``    distributed, with ``papers``   ``paper_id``
``paper_vectors``   distributed, with ``papers``   ``paper_id``
``doc_len``         distributed                    ``doc_id``
``term_freq``       distributed, with ``doc_len``  ``doc_id`` (a paper's postings are on one shard)
``doc_freq``        reference (coordinator)        the corpus-wide df
``index_info``      reference (coordinator)        N, avgdl, the analyser: the corpus-wide statistics
``paper_keys``      reference (coordinator)        the numbers of the ids the citations name
``alembic_version`` coordinator                    the schema revision
``query_log``,      coordinator (local)            what the coordinator's own sessions write
``evidence_*``
==================  ============================  ==========================================================

Two groups are co-located (tables partitioned on the same value with the same modulus share a shard): the text
rows by paper id, the postings by doc id. **Exact global BM25**: the corpus's N, avgdl and df live once, on the
coordinator, and each query term's weight ``qtf * idf`` is computed from them before any posting is read; no shard
ever scores with statistics of its own (the known flaw of per-shard indexes). The coordinator runs the same
statements as a single server; PostgreSQL sends each foreign partition's part of a scan to its shard (the term's
postings there) and sums the parts.

**Build** (``build_sharded``): the SQLite build, as for a single server; on the coordinator a new schema from the
Alembic migrations whose distributed tables are turned into hash-partitioned ones, each partition a foreign table
of a new schema on its shard; each shard's rows copied there with ``COPY`` (which partition a key belongs to is
asked of the coordinator: ``satisfies_hash_partition``, PostgreSQL's own hash, of each table's own keys, since a
citation's citing id or an in-degree's id may name no paper); then the same swap as a single server's, under the
writers' lock. A build that fails at any step drops every new schema and foreign server and leaves the previous
index, its shards included, as it was; the previous index's shard schemas go once the swap has committed.

Adds and removes through the coordinator are PostgreSQL's partition routing: each row goes to the shard its key
hashes to, in the writer's transaction (``postgres_fdw`` opens one on each shard it touches and commits them
after the coordinator's statements succeed; it is not a two-phase commit: see docs/scale-out.md).

**After a killed build.** A build killed outright (SIGKILL, its machine gone down) leaves, as a single server's
does (``retrieval.store.postgres.build``), its local folder (``retrieval-shardbuild-XXXXXXXX``) and its
coordinator schema, and also its foreign servers ``retrieval_<tag>_s<i>`` (with their user mappings) and its
schema ``retrieval_shard_<tag>`` on each shard it reached. The next sharded build on the coordinator removes them,
with the owners asked after as there:

- the folder is ``flock``'ed for the build's life (``build.build_folder``), and removed once its lock can be taken;
- the coordinator schema is marked and held by the build's session lock (``build.claim_schema``), and dropped
  by any later build, of one server or sharded, once the lock can be taken;
- each foreign server is marked (``SERVER_MARK``) in the transaction that creates it, and covered by the same
  lock (keyed on the coordinator schema's name, which the server's name carries); each shard schema is created
  by the build's session on that shard holding a lock of its own there. A later sharded build drops a marked
  server whose build's lock it can take on the coordinator, after the shard schema it leads to (reached as the
  server reaches it, with its options and user mapping), whose lock it takes on the shard: a killed build's
  sessions end on every server, while a running build holds both. The shards are the killed build's own, the
  ones this build names or others: each server knows its shard.

The index's own servers carry no mark: the swap's transaction clears the new index's servers' marks, and marks
the replaced index's servers, which from that commit on lead only to what nothing reads. The build drops those
itself just after the swap; killed before it did, it leaves them to the next build like its own. A server the
index's layout names is never dropped however it is marked, nor a schema on a shard but through a server
(a shard database may serve another coordinator's index too), nor a server without the mark (a build's from
before the mark, or one made by hand).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Sequence

from ... import stop
from ...config import DatabaseURL, resolve_db
from ...corpus.paper import Paper
from ...errors import ConfigError, IndexNotFoundError, StoreError
from ...text import DEFAULT_STEM, DEFAULT_STOPWORDS
from ..schema.catalogue import COORDINATOR, DISTRIBUTED
from .connection import (
    MAPPING_OPTIONS,
    SCHEMA,
    SHARD_SCHEMA_PREFIX,
    driver,
    open_raw,
    server_error,
    server_params,
    url_of,
)

#: The key of ``index_info`` that records the layout (JSON: one entry per shard, in partition order).
LAYOUT_KEY = "shards"
#: Foreign keys kept on a shard: between tables co-located on the same key (the others span shards).
SHARD_FOREIGN_KEYS = {
    ("paper_authors", "papers"), ("field_sources", "papers"), ("paper_vectors", "papers"), ("term_freq", "doc_len")
}  # fmt: skip
#: Rows fetched from a shard per round trip (postgres_fdw's default is 100).
FETCH_SIZE = 10_000
MAX_SHARDS = 64
#: The local folders of sharded builds' SQLite phase (``build.build_folder``; a single server's have their own).
FOLDER_PREFIX = "retrieval-shardbuild-"
#: The comment on a foreign server that leads to a build's shard schema, or to a replaced index's: what a later
#: build drops once no session holds its build's lock (``remove_stale_builds``). The index's servers have none.
SERVER_MARK = (
    "retrieval: a sharded build's or a replaced index's foreign server, dropped with its shard's schema by a later "
    "build once the session holding its build's lock is gone"
)
#: A foreign server as ``_create_servers`` names it (the group: the build's tag): nothing else is ever dropped.
_SERVER_NAME = re.compile(re.escape(SCHEMA) + r"_([0-9]+_[0-9]+)_s[0-9]+")


def parse_shards(value: str | Sequence[str]) -> list[DatabaseURL]:
    """The shard URLs of ``--shards URL,URL,...`` (or a list): each a PostgreSQL URL, all distinct."""
    items = [v.strip() for v in (value.split(",") if isinstance(value, str) else value)]
    items = [v for v in items if v]
    if not items:
        raise ConfigError("--shards needs at least one PostgreSQL URL (postgresql://USER@HOST:PORT/DB,...)")
    if len(items) > MAX_SHARDS:
        raise ConfigError(f"--shards names {len(items)} servers; at most {MAX_SHARDS} are supported")
    urls = []
    for item in items:
        url = resolve_db(item)
        if not isinstance(url, DatabaseURL):
            raise ConfigError(f"--shards takes PostgreSQL URLs (postgresql://USER@HOST:PORT/DB), got {item!r}")
        urls.append(url)
    if len({_server_key(u) for u in urls}) != len(urls):
        raise ConfigError("--shards names the same database twice: give each shard its own database")
    return urls


#: Which database a connection reached, whatever name its host was given by (``localhost``, ``127.0.0.1``, a
#: socket): the cluster (its start, to the microsecond) and the database's oid in it.
_DATABASE_IDENTITY_SQL = (
    "SELECT pg_postmaster_start_time()::text, oid FROM pg_database WHERE datname = current_database()"
)


def _refuse_one_database_twice(coordinator, url: DatabaseURL, opened: list, shards: list[DatabaseURL]) -> None:
    """A ``ConfigError`` when two of the servers reach one database under different names (``parse_shards``
    compares the names): a build would wait on its own lock there for ever."""
    seen: dict[tuple, str] = {}
    named = [(coordinator, f"the index's database ({url.shown})")]
    named += [(raw, f"shard {i} ({shard.shown})") for i, (raw, shard) in enumerate(zip(opened, shards, strict=True))]
    for raw, name in named:
        identity = tuple(raw.execute(_DATABASE_IDENTITY_SQL).fetchone())
        if identity in seen:
            raise ConfigError(
                f"{name} is the same database as {seen[identity]}, under another name: give each shard its own "
                "database, none of them the index's"
            )
        seen[identity] = name


def _server_key(url: DatabaseURL) -> tuple:
    info = _conninfo(url)
    return (info.get("host", ""), info.get("port", "5432"), info.get("dbname", ""))


def _conninfo(url: DatabaseURL) -> dict[str, str]:
    driver()
    from psycopg.conninfo import conninfo_to_dict

    return {k: str(v) for k, v in conninfo_to_dict(str(url)).items() if v is not None}


def _connect(url: DatabaseURL):
    psycopg = driver()
    try:
        return open_raw(str(url))
    except psycopg.Error as exc:
        raise server_error(exc, url, "open") from None


def _server_options(url: DatabaseURL) -> tuple[dict[str, str], dict[str, str]]:
    """The foreign server's options and the user mapping's, from a shard's URL."""
    info = _conninfo(url)
    # Every connection setting of the URL (sslmode, connect_timeout, ...): the foreign server's, but for the
    # user mapping's own (a role's name and secrets); client_encoding is postgres_fdw's to set.
    server = {k: v for k, v in info.items() if k not in MAPPING_OPTIONS and k != "client_encoding"}
    # Remote estimates: the planner asks a shard for a foreign scan's cost, and only then considers scans
    # parameterised by a join (a lookup per key instead of a whole foreign table: 12 s to 0.3 s per search on hepth).
    server.update(fetch_size=str(FETCH_SIZE), async_capable="true", use_remote_estimate="true")
    mapping = {k: info[k] for k in MAPPING_OPTIONS if k in info}
    return server, mapping


def _options(options: dict[str, str]):
    from psycopg import sql

    return sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(k), sql.Literal(v)) for k, v in options.items())


def _schemas_of(tag: str) -> tuple[str, str]:
    """The build ``tag``'s schemas: on the coordinator (whose name keys the build's lock there) and on each shard."""
    return f"{SCHEMA}_build_{tag}", f"{SHARD_SCHEMA_PREFIX}{tag}"


def _create_servers(raw, tag: str, shards: list[DatabaseURL]) -> list[str]:
    """One foreign server (and a user mapping for every role of the coordinator) per shard, marked as a build's
    (``SERVER_MARK``) until the swap makes them the index's: the caller's transaction holds both."""
    from psycopg import sql

    # In public, never in the index's schema (the database's search_path once an index lives there): a rebuild
    # drops the replaced schema with CASCADE, which would take the wrapper, the servers and every foreign table.
    raw.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw WITH SCHEMA public")
    home = raw.execute(
        "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'postgres_fdw'"
    ).fetchone()[0]
    if home != "public":  # put there by an earlier version's build over an index of one server
        raw.execute("ALTER EXTENSION postgres_fdw SET SCHEMA public")
    names = []
    for i, url in enumerate(shards):
        name = f"{SCHEMA}_{tag}_s{i}"
        server, mapping = _server_options(url)
        raw.execute(
            sql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER postgres_fdw OPTIONS ({})").format(
                sql.Identifier(name), _options(server)
            )
        )
        raw.execute(
            sql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {} OPTIONS ({})").format(
                sql.Identifier(name), _options(mapping)
            )
            if mapping
            else sql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {}").format(sql.Identifier(name))
        )
        raw.execute(sql.SQL("COMMENT ON SERVER {} IS {}").format(sql.Identifier(name), sql.Literal(SERVER_MARK)))
        names.append(name)
    return names


def _partition_coordinator(raw, schema: str, servers: list[str], shard_schema: str) -> None:
    """Turn ``schema``'s distributed tables (as the migrations made them) into hash-partitioned tables whose
    partitions are the shards' tables."""
    n = len(servers)
    # The views read the tables about to be replaced (dropping those drops them): made again over the new ones.
    views = raw.execute("SELECT viewname, definition FROM pg_views WHERE schemaname = %s", (schema,)).fetchall()
    indexes = raw.execute(
        "SELECT i.tablename, i.indexdef FROM pg_indexes AS i JOIN pg_class AS c ON c.relname = i.indexname "
        "JOIN pg_index AS x ON x.indexrelid = c.oid JOIN pg_namespace AS s ON s.oid = c.relnamespace "
        "WHERE i.schemaname = %s AND s.nspname = %s AND NOT x.indisunique",
        (schema, schema),
    ).fetchall()
    for table, key in DISTRIBUTED.items():
        # A serial column's sequence is kept (later adds draw doc ids from it) and handed to the new table.
        sequences = raw.execute(
            "SELECT a.attname, pg_get_serial_sequence(%s, a.attname) FROM pg_attribute AS a "
            "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped "
            "AND pg_get_serial_sequence(%s, a.attname) IS NOT NULL",
            (f'"{schema}"."{table}"', f'"{schema}"."{table}"', f'"{schema}"."{table}"'),
        ).fetchall()
        for _, seq in sequences:
            raw.execute(f"ALTER SEQUENCE {seq} OWNED BY NONE")
        raw.execute(
            f'CREATE TABLE "{schema}"."{table}__sharded" (LIKE "{schema}"."{table}" INCLUDING DEFAULTS) '
            f'PARTITION BY HASH ("{key}")'
        )
        raw.execute(f'DROP TABLE "{schema}"."{table}" CASCADE')  # its keys, and the keys other tables had to it
        raw.execute(f'ALTER TABLE "{schema}"."{table}__sharded" RENAME TO "{table}"')
        for column, seq in sequences:
            raw.execute(f'ALTER SEQUENCE {seq} OWNED BY "{schema}"."{table}"."{column}"')
        for i, server in enumerate(servers):
            raw.execute(
                f'CREATE FOREIGN TABLE "{schema}"."{table}_s{i}" PARTITION OF "{schema}"."{table}" '
                f'FOR VALUES WITH (MODULUS {n}, REMAINDER {i}) SERVER "{server}" '
                f"OPTIONS (schema_name '{shard_schema}', table_name '{table}')"
            )
        # The secondary indexes, as definitions on the coordinator: PostgreSQL creates them on no foreign
        # partition (each shard has its own), and they keep the schema the one the checks and psql expect.
        for on, definition in indexes:
            if on == table:
                raw.execute(definition)
    for name, definition in views:
        raw.execute(f'CREATE VIEW "{schema}"."{name}" AS {definition}')


#: The distribution keys that are numbers (the others are paper ids).
INTEGER_KEYS = ("doc_id", "citing_key")


def _assign(raw, schema: str, table: str, keys: list, n: int) -> list[set]:
    """Which partition of ``schema.table`` each key belongs to, asked of the coordinator (PostgreSQL's hash)."""
    kind = "integer[]" if DISTRIBUTED[table] in INTEGER_KEYS else "text[]"
    rows = raw.execute(  # one statement, the keys sent once: each key with the remainder whose partition takes it
        f"SELECT k, r FROM unnest(%s::{kind}) AS k CROSS JOIN generate_series(0, %s - 1) AS r "
        f"WHERE satisfies_hash_partition(%s::regclass::oid, %s, r, k)",
        (keys, n, f'"{schema}"."{table}"', n),
    ).fetchall()
    parts: list[set] = [set() for _ in range(n)]
    for key, remainder in rows:
        parts[remainder].add(key)
    return parts


def _partitions(lite: sqlite3.Connection, raw, schema: str, n: int) -> dict[str, list[set]]:
    """Each distributed table's keys in the SQLite build, by partition (``_assign``). Each table's own keys: a
    citation's citing id and an in-degree's paper id may name no paper of the corpus (a dangling reference, kept
    as on one server), and such a row would have no shard among the papers' ids. A table with a key to a
    co-located one (``SHARD_FOREIGN_KEYS``) has only keys of that table, and shares its placement."""
    parents = dict(SHARD_FOREIGN_KEYS)
    parts: dict[str, list[set]] = {}
    for table, key in DISTRIBUTED.items():  # parents first
        if table in parents:
            parts[table] = parts[parents[table]]
        else:
            keys = [k for (k,) in lite.execute(f'SELECT DISTINCT "{key}" FROM "{table}"')]
            parts[table] = _assign(raw, schema, table, keys, n)
    return parts


def _load_shard(lite: sqlite3.Connection, raw, url: DatabaseURL, schema: str, wanted: dict[str, set]) -> dict[str, int]:
    """Create ``schema`` on one shard (the migrations' distributed tables) and copy its rows into it: each table's
    rows whose key is among ``wanted[table]``. The session ``raw`` holds the schema's lock from then on
    (``build.claim_schema``), until the build closes it."""
    from .build import _constraints, _secondary_indexes, claim_schema, copy_table, migrate_schema, settle
    from .connection import PgConnection

    claim_schema(raw, schema, mark=None)  # its mark is its foreign server's, on the coordinator
    migrate_schema(PgConnection(raw, url), schema)
    tables = [name for (name,) in raw.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]
    for table in tables:
        if table not in DISTRIBUTED:
            raw.execute(f'DROP TABLE "{schema}"."{table}" CASCADE')
    indexes = _secondary_indexes(raw, schema)
    keys = _constraints(raw, schema)
    counts = {}
    with raw.transaction():
        for name, _ in indexes:
            raw.execute(f'DROP INDEX "{schema}"."{name}"')
        for table, name, _, _ in keys:
            raw.execute(f'ALTER TABLE "{schema}"."{table}" DROP CONSTRAINT "{name}"')
        for table, key in DISTRIBUTED.items():
            counts[table] = copy_table(lite, raw, schema, table, (key, wanted[table]))
        for table, name, kind, definition in reversed(keys):
            if kind == "f" and not any(table == t and f"REFERENCES {r}(" in definition for t, r in SHARD_FOREIGN_KEYS):
                continue  # a key to a row that may live on another shard
            raw.execute(f'ALTER TABLE "{schema}"."{table}" ADD CONSTRAINT "{name}" {definition}')
        for _, definition in indexes:
            raw.execute(definition)
        raw.execute(f'CREATE INDEX ix_term_freq_doc_id ON "{schema}".term_freq (doc_id)')
    settle(raw, schema)
    return counts


def _copy_coordinator(lite: sqlite3.Connection, raw, schema: str, layout: list[dict]) -> None:
    """The coordinator's own tables from the SQLite build, the layout recorded in ``index_info``."""
    from .build import copy_table

    for table in COORDINATOR:
        raw.execute(f'DELETE FROM "{schema}"."{table}"')  # the migrations' own rows (alembic_version)
        copy_table(lite, raw, schema, table)
    raw.execute(f'INSERT INTO "{schema}".index_info (key, value) VALUES (%s, %s)', (LAYOUT_KEY, json.dumps(layout)))
    raw.execute(
        f"SELECT setval(pg_get_serial_sequence('\"{schema}\".doc_freq', 'term_id'), "
        f'coalesce((SELECT max(term_id) FROM "{schema}".doc_freq), 0) + 1, false)'
    )
    last_doc = lite.execute("SELECT coalesce(max(doc_id), 0) FROM doc_len").fetchone()[0]
    raw.execute(f"SELECT setval(pg_get_serial_sequence('\"{schema}\".doc_len', 'doc_id'), %s, false)", (last_doc + 1,))
    raw.execute(f'ANALYZE "{schema}".doc_freq')


def _old_layout(raw) -> list[dict] | None:
    exists = raw.execute("SELECT to_regclass(%s)", (f'"{SCHEMA}".index_info',)).fetchone()[0]
    if exists is None:
        return None
    row = raw.execute(f'SELECT value FROM "{SCHEMA}".index_info WHERE key = %s', (LAYOUT_KEY,)).fetchone()
    return json.loads(row[0]) if row else None


def build_sharded(
    papers: Iterable[Paper],
    url: DatabaseURL,
    shards: list[DatabaseURL],
    *,
    source: str = "",
    progress=None,
    workers: int | None = None,
    stem: str | None = DEFAULT_STEM,
    stopwords: str | None = DEFAULT_STOPWORDS,
    semantic: str | None = None,
    named: str = "--shards",
):
    """Build the index of ``papers`` at the coordinator ``url``, its distributed tables partitioned over
    ``shards`` (see the module docstring); returns the build's summary (``summary.shards``: rows per shard).
    ``named``: where the shards' URLs came from, as messages name them (``--shards``, or those a rebuilt index
    records)."""
    from ..sqlite.build import build_index
    from .build import _fingerprint, build_folder, claim_schema, migrate_schema, remove_stale_folders, swap_schema
    from .connection import PgConnection

    psycopg = driver()
    if any(_server_key(s) == _server_key(url) for s in shards):
        raise ConfigError("a shard cannot be the coordinator's own database: give each shard its own database")
    started = time.perf_counter()
    coordinator = _connect(url)  # every server is reached before the corpus is read
    opened = []
    try:
        for i, shard in enumerate(shards):
            try:
                opened.append(_connect(shard))
            except IndexNotFoundError:
                raise IndexNotFoundError(
                    f"shard {i} of {named} has no database at {shard.shown}: create it (`createdb`) on that "
                    "server, then run the build again"
                ) from None
            except StoreError as exc:
                raise StoreError(f"shard {i} of {named}: {exc}") from None
        _refuse_one_database_twice(coordinator, url, opened, shards)
        before = _fingerprint(coordinator, url)
        _, leftovers = remove_stale_builds(coordinator)  # before this build claims anything: its own would pass
    except BaseException as exc:
        for c in [coordinator, *opened]:
            c.close()
        if isinstance(exc, psycopg.Error):
            raise server_error(exc, url, "open") from None
        raise
    remove_stale_folders(prefix=FOLDER_PREFIX)
    tag = f"{os.getpid()}_{int(time.time() * 1000)}"
    schema, shard_schema = _schemas_of(tag)
    servers: list[str] = []
    created_on: list[int] = []
    replaced: list[dict] = []  # the replaced index's layout, as the swap found it
    where = url  # the server a failure names
    try:
        with build_folder(FOLDER_PREFIX) as tmp:
            file = tmp / "index.db"
            summary = build_index(papers, file, source=source, progress=progress, workers=workers, stem=stem,
                                  stopwords=stopwords, semantic=semantic)  # fmt: skip
            stop.staged()  # the file is the copy's source, not the index: a stop from here on stops the build
            lite = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
            try:
                claim_schema(coordinator, schema)  # the lock covers the servers too (remove_stale_builds)
                migrate_schema(PgConnection(coordinator, url), schema)
                with coordinator.transaction():
                    servers = _create_servers(coordinator, tag, shards)
                    _partition_coordinator(coordinator, schema, servers, shard_schema)
                parts = _partitions(lite, coordinator, schema, len(shards))
                per_shard = []
                for i, (shard, raw) in enumerate(zip(shards, opened, strict=True)):
                    where = shard
                    created_on.append(i)
                    wanted = {table: found[i] for table, found in parts.items()}
                    per_shard.append(_load_shard(lite, raw, shard, shard_schema, wanted))
                where = url
                layout = [
                    {"shard": i, "url": s.shown, "server": servers[i], "schema": shard_schema}
                    for i, s in enumerate(shards)
                ]
                with coordinator.transaction():
                    _copy_coordinator(lite, coordinator, schema, layout)
            finally:
                lite.close()
            swap_schema(coordinator, url, schema, before, also=lambda raw: replaced.extend(_hand_over(raw, servers)))
    except BaseException as exc:
        _drop_new(coordinator, opened, schema, shard_schema, servers, created_on)
        for c in [coordinator, *opened]:
            c.close()
        if isinstance(exc, psycopg.Error):
            raise server_error(exc, where, "write to") from None
        raise
    # The previous index's shard schemas and servers: no longer read by anything (best effort; a failure here
    # leaves unused tables behind, named in the warning, and loses nothing: a later build drops them).
    leftovers += _drop_old(coordinator, replaced)
    for c in [coordinator, *opened]:
        c.close()
    summary.path = url.shown
    summary.seconds = time.perf_counter() - started
    summary.shards = [
        {"shard": i, "url": s.shown, "rows": rows} for i, (s, rows) in enumerate(zip(shards, per_shard, strict=True))
    ]
    summary.warnings.extend(leftovers)
    return summary


def _hand_over(raw, servers: list[str]) -> list[dict]:
    """In the swap's transaction, the old index still in place: the new servers become the index's (their marks
    cleared) and the replaced index's become a build's leftovers (marked), so that a build killed before it drops
    them leaves them to the next. Returns the replaced index's layout."""
    from psycopg import sql

    for name in servers:
        raw.execute(sql.SQL("COMMENT ON SERVER {} IS NULL").format(sql.Identifier(name)))
    old = _old_layout(raw) or []
    names = [entry["server"] for entry in old if _SERVER_NAME.fullmatch(entry["server"])]
    there = raw.execute("SELECT srvname FROM pg_foreign_server WHERE srvname = ANY(%s)", (names,)).fetchall()
    for (name,) in there:
        raw.execute(sql.SQL("COMMENT ON SERVER {} IS {}").format(sql.Identifier(name), sql.Literal(SERVER_MARK)))
    return old


def _drop_new(coordinator, opened, schema, shard_schema, servers, created_on) -> None:
    """What a failed build made (it is still running, and holds the locks): the shards' schemas first, and a
    server only once its shard's schema is gone, so that what a shard kept is left reachable (and marked) for a
    later build to drop."""
    psycopg = driver()
    kept = set()
    for i in created_on:
        try:
            opened[i].execute(f'DROP SCHEMA IF EXISTS "{shard_schema}" CASCADE')
        except psycopg.Error:
            kept.add(i)
    with contextlib.suppress(psycopg.Error):
        coordinator.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    for i, name in enumerate(servers):
        if i not in kept:
            with contextlib.suppress(psycopg.Error):
                coordinator.execute(f'DROP SERVER IF EXISTS "{name}" CASCADE')


def _drop_old(coordinator, layout: list[dict]) -> list[str]:
    """Drop the replaced index's servers (marked by the swap) and the shard schemas they lead to; warnings."""
    left, by_tag = [], {}
    for entry in layout:
        found = _SERVER_NAME.fullmatch(entry["server"])
        if found:
            by_tag.setdefault(found.group(1), []).append(entry["server"])
        else:  # not a name this module gives: never dropped by it
            left.append(
                f"the replaced index's schema {entry['schema']} on {entry['url']} was left (its foreign server "
                f"{entry['server']!r} is not named as a build names it): drop both by hand (nothing reads them)"
            )
    for tag, names in by_tag.items():
        left += _drop_servers(coordinator, tag, names, "the replaced index's")[1]
    return left


def remove_stale_builds(coordinator) -> tuple[list[str], list[str]]:
    """Remove what sharded builds that are gone left (see the module docstring), on the coordinator's session
    ``coordinator`` and on the shards its marked servers lead to: the marked schemas (``build.remove_stale_schemas``),
    then each marked server whose build's lock can be taken, after the shard schema it leads to. A running build
    holds its lock: what it made is left. Returns (the schemas and servers dropped, a warning for each that could
    not be)."""
    from .build import remove_stale_schemas

    dropped, failed = remove_stale_schemas(coordinator)
    rows = coordinator.execute(
        "SELECT srvname FROM pg_foreign_server WHERE srvname LIKE %s "
        "AND obj_description(oid, 'pg_foreign_server') = %s ORDER BY srvname",
        (SCHEMA + r"\_%", SERVER_MARK),
    ).fetchall()
    by_tag: dict[str, list[str]] = {}
    for (name,) in rows:
        if found := _SERVER_NAME.fullmatch(name):
            by_tag.setdefault(found.group(1), []).append(name)
    for tag, names in by_tag.items():
        # Left by a killed build, or by a replaced index whose shard could not be reached when it was replaced.
        gone, left = _drop_servers(coordinator, tag, names, "a left-over (a killed build's or a replaced index's)")
        dropped += gone
        failed += left
    return dropped, failed


def _drop_servers(coordinator, tag: str, names: list[str], whose: str) -> tuple[list[str], list[str]]:
    """Drop the build ``tag``'s marked servers ``names``, each after the shard schema it leads to, under that
    build's lock on the coordinator (nothing if another session holds it: the build is running, or another build
    is at this). Returns (the servers dropped, warnings)."""
    from .build import build_lock, first_line

    psycopg = driver()
    schema, shard_schema = _schemas_of(tag)
    dropped, failed = [], []
    with build_lock(coordinator, schema) as taken:
        if not taken:
            return dropped, failed
        if coordinator.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone():
            return dropped, failed  # its coordinator schema could not be dropped (a warning says so): later
        read = {entry["server"] for entry in _old_layout(coordinator) or []}  # the index's: never, marked or not
        for name in names:
            if name in read or not _marked(coordinator, name):
                continue
            shown = "its shard"
            try:
                params = server_params(coordinator, name)
                shown = DatabaseURL(url_of(params)).shown
                if not _drop_shard_schema(params, shard_schema):
                    continue  # the build's session on that shard is still there: a later build's to drop
                if _drop_marked_server(coordinator, name):
                    dropped.append(name)
            except psycopg.Error as exc:
                failed.append(
                    f"{whose} foreign server {name} and its schema {shard_schema} on {shown} could not be dropped "
                    f"({first_line(exc)}): drop them by hand (nothing reads them)"
                )
    return dropped, failed


def _marked(raw, server: str) -> bool:
    """Whether the foreign server ``server`` is there and marked as a build's (``SERVER_MARK``)."""
    return (
        raw.execute(
            "SELECT 1 FROM pg_foreign_server WHERE srvname = %s AND obj_description(oid, 'pg_foreign_server') = %s",
            (server, SERVER_MARK),
        ).fetchone()
        is not None
    )


def _drop_shard_schema(params: dict[str, str], schema: str) -> bool:
    """Drop ``schema`` on the shard that ``params`` (a foreign server's) reach, under its build's lock there;
    whether it is gone (False: the build's session on the shard holds the lock)."""
    from psycopg import sql

    from .build import DROP_LOCK_TIMEOUT, build_lock

    with open_raw(url_of(params)) as shard, build_lock(shard, schema) as taken:
        if not taken:
            return False
        with shard.transaction():
            shard.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{DROP_LOCK_TIMEOUT}s")))
            shard.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    return True


def _drop_marked_server(raw, name: str) -> bool:
    """Drop the foreign server ``name`` and its public user mapping if it is still marked; whether it was. Not
    ``CASCADE``: a foreign table on it that is still there (a schema not dropped yet, one made by hand) keeps it,
    and the failure is a warning."""
    from psycopg import sql

    from .build import DROP_LOCK_TIMEOUT

    with raw.transaction():
        raw.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{DROP_LOCK_TIMEOUT}s")))
        if not _marked(raw, name):
            return False
        raw.execute(sql.SQL("DROP USER MAPPING IF EXISTS FOR PUBLIC SERVER {}").format(sql.Identifier(name)))
        raw.execute(sql.SQL("DROP SERVER {}").format(sql.Identifier(name)))
    return True


def recorded_shards(url: DatabaseURL) -> list[DatabaseURL] | None:
    """The shards of the index at the coordinator ``url`` as its foreign servers reach them (None: the index
    there is not sharded, or there is none): a rebuild without ``--shards`` keeps the layout."""
    raw = _connect(url)
    try:
        layout = _old_layout(raw)
        if not layout:
            return None
        out = []
        for entry in layout:
            params = server_params(raw, entry["server"])
            out.append(DatabaseURL(url_of(params)))
        return out
    except driver().Error as exc:  # a role that may not read the index's schema, a server gone meanwhile
        raise server_error(exc, url, "open") from None
    finally:
        raw.close()
