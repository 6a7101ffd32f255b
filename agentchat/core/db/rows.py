"""Hot-path row access that skips the queryset compiler.

Building and compiling a queryset costs 0.2-0.4 ms of CPU on this machine kind, several times
what SQLite needs to run the query, and token authentication and the channel lookup run on
every API request. ``RowSelect`` and ``row_insert`` build their SQL once per database alias
from the models' metadata and pass every value through the same field preparation and
converters the ORM uses, so they read and write exactly what the ORM would.

Use them only where a profile says so; everywhere else the ORM is clearer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field, Model

M = TypeVar("M", bound=Model)
_BASE_PREP_SAVE = Field.get_db_prep_save
Converter = Callable[[Any, Any, Any], Any]


class _Compiled:
    def __init__(self, sql: str, columns: list[tuple[int, list[tuple[Converter, Any]]]]) -> None:
        self.sql = sql
        self.columns = columns  # per column: (position, [(converter, expression), ...])


def _column(field: Field[Any, Any]) -> str:
    """A concrete field's column (the stubs allow None, which only a non-concrete field has)."""
    return cast(str, field.column)


class RowSelect:
    """A fixed SELECT of whole model rows, one or more models joined, returning instances.

    ``from_`` and ``where`` name tables as ``{ModelName}`` and columns through the aliases
    given with each model::

        RowSelect(
            (ApiToken, "t"), (Agent, "a"),
            from_="{ApiToken} t JOIN {Agent} a ON a.id = t.agent_id",
            where="t.digest = %s",
        )
    """

    def __init__(self, *models: tuple[type[Model], str], from_: str, where: str) -> None:
        self.models = models
        self.from_ = from_
        self.where = where
        self._compiled: dict[str, _Compiled] = {}

    def _compile(self, using: str) -> _Compiled:
        connection = connections[using]
        quote = connection.ops.quote_name
        tables = {model.__name__: quote(model._meta.db_table) for model, _ in self.models}
        selected: list[str] = []
        columns: list[tuple[int, list[tuple[Converter, Any]]]] = []
        for model, alias in self.models:
            for field in model._meta.concrete_fields:
                expression = field.get_col(alias)
                converters = connection.ops.get_db_converters(
                    expression
                ) + expression.get_db_converters(connection)
                if converters:
                    columns.append((len(selected), [(c, expression) for c in converters]))
                selected.append(f"{alias}.{quote(_column(field))}")
        sql = f"SELECT {', '.join(selected)} FROM {self.from_.format(**tables)} WHERE {self.where}"
        return _Compiled(sql, columns)

    def first(
        self, params: Sequence[Any], using: str = DEFAULT_DB_ALIAS
    ) -> tuple[Model | None, ...] | None:
        """The instances of the first matching row (one per model; None for a model of a LEFT
        JOIN that matched nothing), or None."""
        compiled = self._compiled.get(using)
        if compiled is None:
            compiled = self._compiled[using] = self._compile(using)
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        values = list(row)
        for position, converters in compiled.columns:
            value = values[position]
            for converter, expression in converters:
                value = converter(value, expression, connection)
            values[position] = value
        instances: list[Model | None] = []
        start = 0
        for model, _ in self.models:
            fields = model._meta.concrete_fields
            names = [field.attname for field in fields]
            row_values = values[start : start + len(fields)]
            pk = names.index(model._meta.pk.attname)
            # A LEFT JOIN that matched nothing: no instance (its primary key is never NULL).
            missing = row_values[pk] is None
            instances.append(None if missing else model.from_db(using, names, row_values))
            start += len(fields)
        return tuple(instances)


_insert_sql: dict[tuple[type[Model], str], tuple[str, list[Any]]] = {}


def _insert_statement(model: type[Model], using: str) -> tuple[str, list[Any]]:
    key = (model, using)
    if key not in _insert_sql:
        quote = connections[using].ops.quote_name
        fields = list(model._meta.local_concrete_fields)
        sql = "INSERT INTO {} ({}) VALUES ({})".format(
            quote(model._meta.db_table),
            ", ".join(quote(_column(field)) for field in fields),
            ", ".join(["%s"] * len(fields)),
        )
        _insert_sql[key] = (sql, fields)
    return _insert_sql[key]


# Values that are never an expression: for them Field.get_db_prep_save's ``hasattr(value,
# "as_sql")`` (an AttributeError made and dropped per column, about 20 a post) is known false.
_PLAIN = frozenset({str, int, float, bool, type(None), datetime})


def _params(instance: Model, fields: list[Any], connection: Any) -> list[Any]:
    params = []
    for field in fields:
        value = field.pre_save(instance, True)
        if type(value) in _PLAIN and type(field).get_db_prep_save is _BASE_PREP_SAVE:
            params.append(field.get_db_prep_value(value, connection=connection, prepared=False))
        else:
            params.append(field.get_db_prep_save(value, connection=connection))
    return params


def row_insert(instance: M, using: str = DEFAULT_DB_ALIAS) -> M:
    """INSERT a new instance whose primary key is set; returns it, saved.

    Field defaults, ``auto_now_add`` and value preparation (JSON, datetimes) are applied as by
    ``save()``. No signals are sent: use it only for models nothing listens to.
    """
    connection = connections[using]
    sql, fields = _insert_statement(type(instance), using)
    with connection.cursor() as cursor:
        cursor.execute(sql, _params(instance, fields, connection))
    instance._state.adding = False
    instance._state.db = using
    return instance


def rows_insert(instances: Sequence[Model], using: str = DEFAULT_DB_ALIAS) -> None:
    """``row_insert`` for many new instances of one model, in one ``executemany`` (the folder
    import: Django's ``bulk_create`` spent most of an import compiling its statements)."""
    if not instances:
        return
    connection = connections[using]
    sql, fields = _insert_statement(type(instances[0]), using)
    with connection.cursor() as cursor:
        cursor.executemany(sql, [_params(instance, fields, connection) for instance in instances])
    for instance in instances:
        instance._state.adding = False
        instance._state.db = using


_SQLITE_QUERIES_KEPT = 2048


def sqlite_query_conversion_cached() -> None:
    """Keep Django's SQLite conversion of a query from ``%s`` to ``?`` placeholders: it runs a
    regular expression over the whole statement on every execute (2-3 % of a post's CPU over
    its five statements), for the same few statements. The named-parameter form is left as it
    is; the last ``_SQLITE_QUERIES_KEPT`` statements are kept."""
    import functools

    from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX, SQLiteCursorWrapper

    if getattr(SQLiteCursorWrapper, "_agentchat_cached", False):
        return
    convert = SQLiteCursorWrapper.convert_query

    @functools.lru_cache(maxsize=_SQLITE_QUERIES_KEPT)
    def qmark(query: str) -> str:
        return FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")

    def convert_query(self: Any, query: str, *, param_names: Any = None) -> str:
        if param_names is None:
            return qmark(query)
        return convert(self, query, param_names=param_names)

    SQLiteCursorWrapper.convert_query = convert_query  # type: ignore[method-assign]
    SQLiteCursorWrapper._agentchat_cached = True  # type: ignore[attr-defined]
