"""Every statement written once, rendered for each dialect.

A statement is a template, ``lambda d: f"..."``, that asks the ``Dialect`` ``d`` for the few fragments of SQL
that differ between SQLite and PostgreSQL (as Django's ``DatabaseOperations`` gives each backend small methods
such as ``lookup_cast``): a JSON list parameter read as rows (``json_each`` against ``jsonb_array_elements_text``,
whose values are text there, so they are cast), a membership test that PostgreSQL plans as index lookups
(``= ANY (ARRAY(...))``), ids ordered by their bytes (``COLLATE "C"``), SQLite's ``CROSS JOIN`` that fixes its
join order, doubles said as doubles, ``round`` of a numeric, a snapshot's ``BEGIN``. ``statement`` renders the
template for each dialect and registers both texts under the SQLite one, which names the statement everywhere
(the executor, the tracer, the scatter rules); the executor runs the text of its connection's dialect, so
``--sql`` prints what ran. The parameters are the same dict for both.

A second text is written out (``statement(..., postgresql=...)``, counted in ``OVERRIDES``) only where the plan
truly differs, each with its reason beside it; a sharded coordinator's own texts are ``register_sharded``'s. A
statement with no PostgreSQL text is refused there by name, never run as SQLite's.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import StoreError

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
#: The coordinator of an index sharded over PostgreSQL servers (``retrieval.store.postgres.shards``): PostgreSQL,
#: where a statement may have a third text of its own.
SHARDED = "postgresql, sharded"

_POSTGRESQL: dict[str, str] = {}
_SHARDED: dict[str, str] = {}
#: SQLite texts of the statements a single PostgreSQL server runs with hash joins allowed (``statement(...,
#: hash_joins=True)``): read sessions plan joins as lookups (``retrieval.store.postgres.connection``), which a statement
#: joining thousands of rows to thousands (co-citation, coupling) pays for with seconds (5.4 s against 0.3 s for
#: coupling on hepth). The executor allows hash joins for that statement only (``SET LOCAL`` before it, back after).
HASH_JOINS: set[str] = set()
#: Statements that read only the co-located postings tables (``term_freq``, ``doc_len``) and whose results
#: merge exactly: on a sharded index (``retrieval.store.postgres.shards``) each runs on every shard and the results are
#: merged by the rule it was declared with (``statement(..., scatter=rule)``). Keyed by the SQLite text.
SCATTERED: dict[str, str] = {}
#: The merge rules (``retrieval.store.sql.executor.merge``): ``top_k``, rows ``(paper id, score)`` best first (rounded
#: score, then id), the best ``params["k"]`` of every shard's; ``top_k_counted``, the same with a third column
#: counting what each shard's statement matched, summed (``count(*) OVER ()`` is a shard's count, not the corpus's);
#: ``max``, one value, the largest (a lower bound of a
#: k-th score stays one: a shard whose k-th best reaches t gives the corpus k papers of at least t); ``sum``, one
#: count of disjoint sets (each paper is on one shard); ``concat``, the rows of every shard (disjoint), in shard
#: order.
MERGE_RULES = ("top_k", "top_k_counted", "max", "sum", "concat")


def citations_by(end: str, ids: str, alias: str = "c") -> str:
    """A sharded coordinator's ``citations`` (the view's columns) whose ``end`` (``citing`` or ``cited``) is one of
    the paper ids ``ids`` (a subquery) for a ``FROM``, as ``alias``: the ids numbered on the coordinator
    (``paper_keys``), the shards' links read by one key array (which PostgreSQL sends them), and the numbers they
    hold named by one more key array. Through the view the shards' links were joined to the numbers one lookup at
    a time, and joined to them, the planner hashed the whole of ``paper_keys`` for a few links."""
    return f"""(
    WITH link AS MATERIALIZED (
        SELECT link.citing_key,
               link.cited_key
        FROM citation_links AS link
        WHERE link.{end}_key = ANY (ARRAY(SELECT k.key FROM paper_keys AS k WHERE k.paper_id = ANY (ARRAY({ids}))))
    ),
    named AS MATERIALIZED (
        SELECT k.key,
               k.paper_id
        FROM paper_keys AS k
        WHERE k.key = ANY (ARRAY(SELECT citing_key FROM link UNION SELECT cited_key FROM link))
    )
    SELECT citing.paper_id AS citing_id,
           cited.paper_id AS cited_id
    FROM link
    JOIN named AS citing ON citing.key = link.citing_key
    JOIN named AS cited ON cited.key = link.cited_key
) AS {alias}"""


def register_sharded(sqlite: str, sharded: str) -> str:
    """Record ``sharded`` as the text a sharded index's coordinator runs for the statement whose SQLite text is
    ``sqlite`` (instead of its PostgreSQL text); returns ``sqlite``. On a coordinator every table access to a shard
    is a round trip: these texts read each foreign table once per statement, by a key array
    (``= ANY (ARRAY(...))``, which PostgreSQL sends to the shards), where the PostgreSQL text looks up one key per
    row, which on a single server costs nothing."""
    _SHARDED[sqlite] = sharded
    return sqlite


class Dialect:
    """The fragments of SQL that differ between the dialects, one method each (as Django's
    ``DatabaseOperations``): a statement is written once, as a template ``lambda d: f"..."`` that asks ``d`` for
    them, and ``statement`` renders it for each dialect. SQLite's is the text that runs on SQLite and names the
    statement (the key of every registry here)."""

    name = SQLITE
    #: After an ordering key of ids: ids are ordered by their bytes on both dialects.
    bytes_order = ""
    #: ``CROSS JOIN ... ON``: SQLite keeps the join order as written; an inner join elsewhere.
    cross_join = "CROSS JOIN"
    false = "0"
    begin = "BEGIN"

    def values(self, param: str, cast: str | None = None) -> str:
        """A subquery of the values of the JSON list ``:param`` (``cast`` on PostgreSQL, whose values are text)."""
        return f"SELECT value FROM json_each(:{param})"

    def rows(self, param: str, alias: str | None = None) -> str:
        """A table of the JSON list ``:param``'s values, one per row in its column ``value`` (named ``alias``)."""
        return f"json_each(:{param})" + (f" AS {alias}" if alias else "")

    def numbered_rows(self, param: str, alias: str) -> str:
        """``rows`` with each value's position (``in_list_order`` keeps a statement's rows in it)."""
        return f"json_each(:{param}) AS {alias}"

    def in_list_order(self, alias: str) -> str:
        """What keeps a statement's rows in the order of the list ``numbered_rows`` named ``alias``: nothing on
        SQLite, whose joins run in the order written (``CROSS JOIN``), an ``ORDER BY`` elsewhere."""
        return ""

    def typed(self, expr: str, sql_type: str) -> str:
        """A value of a JSON list as ``sql_type`` (SQLite's ``json_each`` gives it typed; PostgreSQL's text)."""
        return expr

    def items(self, param: str) -> str:
        """The elements of the JSON list ``:param`` as JSON (``value``), whose fields ``field`` reads."""
        return f"json_each(:{param})"

    def field(self, index: int, sql_type: str) -> str:
        """Field ``index`` of an element of ``items`` as ``sql_type`` (SQLite's ``->>`` gives it typed)."""
        return f"value ->> {index}"

    def entries(self, param: str, alias: str) -> str:
        """A table of the JSON object ``:param``'s members named ``alias``: ``key`` (text) and ``value`` (JSON, for
        ``elements``)."""
        return f"json_each(:{param}) AS {alias}"

    def elements(self, expr: str, alias: str) -> str:
        """A table of the JSON list ``expr`` (a column, as ``entries`` gives it) named ``alias``: its values as
        text in ``value``."""
        return f"json_each({expr}) AS {alias}"

    def any_of(self, param: str, cast: str | None = None) -> str:
        """A membership test in the JSON list ``:param``: on PostgreSQL ``= ANY (ARRAY(...))``, planned as an
        index lookup per value (an ``IN`` over a set-returning function is estimated at 100 rows and may be
        hashed)."""
        return f"IN (SELECT value FROM json_each(:{param}))"

    def in_set(self, expr: str, subquery: str) -> str:
        """``expr`` is one of the values ``subquery`` returns: on PostgreSQL ``= ANY (ARRAY(...))``, the subquery
        run once and its array sent to a shard with the condition (an ``IN`` over a subquery stays on a sharded
        coordinator as a filter, every row of the shards' table read to apply it)."""
        return f"{expr} IN ({subquery})"

    def double(self, expr: str) -> str:
        """``expr`` as a double (PostgreSQL reads a bare ``1.0`` as numeric and a parameter by its context)."""
        return expr

    def flag(self, expr: str) -> str:
        """``expr``, a 0/1 integer, as a condition (SQLite's integers are truth values; PostgreSQL's are not)."""
        return expr

    def group_value(self, column: str) -> str:
        """A select item of a column that is the same on every row of a group: read bare on SQLite (PostgreSQL
        asks for an aggregate)."""
        return column

    def alias(self, name: str) -> str:
        """A derived table's alias, which PostgreSQL requires."""
        return ""

    #: After ``DESC``: where NULLs go (SQLite puts them last already).
    nulls_last = ""

    def output(self, alias: str, expr: str) -> str:
        """A result column in ``HAVING`` or in an expression of ``ORDER BY``: by its ``alias`` on SQLite, as its
        ``expr`` on PostgreSQL (which names output columns only as whole sort keys)."""
        return alias

    def paper_of(self, doc: str) -> str:
        """The join that gives the row whose doc id is ``doc`` its paper id as ``dl.paper_id``, NULL where
        ``doc_len`` lacks the row (a damaged index, which the caller refuses rather than rank without the paper).
        On PostgreSQL a lookup per row (``LATERAL ... LIMIT 1``): it cannot see how few rows a JSON list gives, and
        would hash the whole of ``doc_len`` per query."""
        return f"LEFT JOIN doc_len AS dl ON dl.doc_id = {doc}"

    def rounded(self, expr: str, places: int) -> str:
        """``round(expr, places)`` of a double (PostgreSQL rounds numerics only)."""
        return f"round({expr}, {places})"

    def count_of(self, term: str, doc: str) -> str:
        """The join that gives the posting of the term ``term`` in the document ``doc`` as ``tf`` (its ``doc_id``
        and ``count``), looked up by its key for each row before it. On PostgreSQL a lookup per row (``LATERAL``,
        ``OFFSET 0`` so it is not flattened): the planner, which expects 50 query terms where there are a few,
        read every posting of each given paper instead (30 ms where the lookups take 5 on the 100K corpus)."""
        return f"CROSS JOIN term_freq AS tf ON tf.term_id = {term} AND tf.doc_id = {doc}"

    def json_list(self, expr: str) -> str:
        """The values of ``expr`` over a group as one JSON list, as text (the caller decodes it)."""
        return f"json_group_array({expr})"

    def whole(self, expr: str) -> str:
        """A condition: the column ``expr`` holds a whole number. SQLite keeps any value in any column (a text
        typed into an INTEGER column by hand stays text); PostgreSQL's columns hold their type, so only NULL
        fails."""
        return f"typeof({expr}) = 'integer'"


class _PostgreSQL(Dialect):
    name = POSTGRESQL
    bytes_order = ' COLLATE "C"'
    cross_join = "JOIN"
    false = "false"
    begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

    def values(self, param: str, cast: str | None = None) -> str:
        value = "value" if cast is None else f"CAST(value AS {cast})"
        return f"SELECT {value} FROM jsonb_array_elements_text(CAST(:{param} AS jsonb))"

    def rows(self, param: str, alias: str | None = None) -> str:
        return f"jsonb_array_elements_text(CAST(:{param} AS jsonb))" + (f" AS {alias} (value)" if alias else "")

    def numbered_rows(self, param: str, alias: str) -> str:
        return f"jsonb_array_elements_text(CAST(:{param} AS jsonb)) WITH ORDINALITY AS {alias} (value, position)"

    def in_list_order(self, alias: str) -> str:
        return f"\nORDER BY {alias}.position"

    def typed(self, expr: str, sql_type: str) -> str:
        return f"CAST({expr} AS {sql_type})"

    def items(self, param: str) -> str:
        return f"jsonb_array_elements(CAST(:{param} AS jsonb))"

    def field(self, index: int, sql_type: str) -> str:
        return f"CAST(value ->> {index} AS {sql_type})"

    def entries(self, param: str, alias: str) -> str:
        return f"jsonb_each(CAST(:{param} AS jsonb)) AS {alias} (key, value)"

    def elements(self, expr: str, alias: str) -> str:
        return f"jsonb_array_elements_text({expr}) AS {alias} (value)"

    def in_set(self, expr: str, subquery: str) -> str:
        return f"{expr} = ANY (ARRAY({subquery}))"

    def any_of(self, param: str, cast: str | None = None) -> str:
        values = f"jsonb_array_elements_text(CAST(:{param} AS jsonb))"
        return f"= ANY (ARRAY(SELECT {values if cast is None else f'CAST({values} AS {cast})'}))"

    def double(self, expr: str) -> str:
        return f"CAST({expr} AS double precision)"

    def flag(self, expr: str) -> str:
        return f"{expr} <> 0"

    def group_value(self, column: str) -> str:
        return f"min({column}) AS {column}"

    def alias(self, name: str) -> str:
        return f" AS {name}"

    nulls_last = " NULLS LAST"

    def output(self, alias: str, expr: str) -> str:
        return expr

    def paper_of(self, doc: str) -> str:
        return (
            f"LEFT JOIN LATERAL (SELECT dl.paper_id FROM doc_len AS dl WHERE dl.doc_id = {doc} LIMIT 1) AS dl ON true"
        )

    def rounded(self, expr: str, places: int) -> str:
        return f"round(CAST({expr} AS numeric), {places})"

    def count_of(self, term: str, doc: str) -> str:
        return (
            "JOIN LATERAL (SELECT tf.doc_id, tf.count FROM term_freq AS tf "
            f"WHERE tf.term_id = {term} AND tf.doc_id = {doc} OFFSET 0) AS tf ON true"
        )

    def json_list(self, expr: str) -> str:
        return f"CAST(json_agg({expr}) AS text)"

    def whole(self, expr: str) -> str:
        return f"{expr} IS NOT NULL"


#: Each dialect's fragments.
DIALECTS = {SQLITE: Dialect(), POSTGRESQL: _PostgreSQL()}
#: Statements whose PostgreSQL text is written out, not rendered from one template: the plan differs.
OVERRIDES: set[str] = set()
#: Statements that run on PostgreSQL only (snapshots' locks, sizes from its catalogue), keyed by their text.
POSTGRESQL_ONLY: set[str] = set()


def statement(
    template: Callable[[Dialect], str] | str,
    postgresql: str | None = None,
    only: str | None = None,
    scatter: str | None = None,
    hash_joins: bool = False,
) -> str:
    """Register the statement ``template`` (a text, or a function of a ``Dialect`` returning one) rendered for
    each dialect; returns its SQLite text, which names it. ``postgresql``, a text written out for PostgreSQL
    where its plan truly differs (say why beside it), is counted in ``OVERRIDES``; ``only=POSTGRESQL`` marks a
    statement that runs there only. What the statement declares of itself: ``scatter``, the rule that merges its
    results from every shard of a sharded index (``MERGE_RULES``: it reads only co-located tables), and
    ``hash_joins``, that a single PostgreSQL server may hash-join in it (``HASH_JOINS``)."""
    if scatter is not None and scatter not in MERGE_RULES:
        raise ValueError(f"unknown merge rule {scatter!r}")
    if isinstance(template, str):
        sqlite, rendered = template, template
    else:
        sqlite, rendered = template(DIALECTS[SQLITE]), template(DIALECTS[POSTGRESQL])
    if postgresql is not None:
        OVERRIDES.add(sqlite)
        rendered = postgresql
    if only == POSTGRESQL:
        POSTGRESQL_ONLY.add(sqlite)
    if scatter is not None:
        SCATTERED[sqlite] = scatter
    if hash_joins:
        HASH_JOINS.add(sqlite)
    _POSTGRESQL[sqlite] = rendered
    return sqlite


def text_for(sql: str, dialect: str, name: str = "") -> str:
    """The text of ``sql`` (a SQLite text) to run on ``dialect``."""
    if dialect == SQLITE:
        return sql
    if dialect == SHARDED and sql in _SHARDED:
        return _SHARDED[sql]
    try:
        return _POSTGRESQL[sql]
    except KeyError:
        raise StoreError(
            f"the statement {name or sql[:60]!r} has no PostgreSQL text yet: this operation works on SQLite "
            "index files only for now"
        ) from None


def registered(dialect: str = POSTGRESQL) -> dict[str, str]:
    """Every registered pair (SQLite text -> the dialect's text), for tests."""
    return dict(_SHARDED if dialect == SHARDED else _POSTGRESQL)


# A read snapshot: SQLite's read transaction under WAL; on PostgreSQL, one snapshot for every statement in it.
statement(lambda d: d.begin)
HASH_JOINS_ON_SQL = statement("SET LOCAL enable_hashjoin = on", only=POSTGRESQL)
HASH_JOINS_OFF_SQL = statement("SET LOCAL enable_hashjoin = off", only=POSTGRESQL)
statement("COMMIT")
statement("ROLLBACK")
