"""Bulk writes (:mod:`cdnaas.db.bulk`) on both backends: PostgreSQL's one-statement
upsert of arrays and SQLite's statement per row give the same rows."""
import datetime as dt

import pytest
from sqlalchemy import (BigInteger, Column, DateTime, Float, Integer, MetaData, String, Table,
                        Text, UniqueConstraint, select)

from cdnaas.db import bulk
from cdnaas.db.engine import Database

METADATA = MetaData()
MINUTES = Table(
    "bulk_minutes", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("vcdn_id", String(36)), Column("minute", DateTime(timezone=True)),
    Column("requests", BigInteger, default=0), Column("watts", Float, default=0.0),
    Column("note", Text, nullable=True),
    UniqueConstraint("vcdn_id", "minute"))
AT = dt.datetime(2026, 11, 29, 6, 0, tzinfo=dt.timezone.utc)


@pytest.fixture
def database(database_url):
    found = Database(database_url)
    METADATA.create_all(found.engine)
    yield found
    found.dispose()


def add_up(excluded):
    return {"requests": MINUTES.c.requests + excluded.requests,
            "watts": MINUTES.c.watts + excluded.watts, "note": excluded.note}


def upsert(database, rows):
    with database.transaction() as session:
        bulk.upsert(session, MINUTES, rows, ["vcdn_id", "minute"], add_up)


def stored(database):
    with database.sessions() as session:
        return {(r.vcdn_id, r.minute.astimezone(dt.timezone.utc)): (r.requests, r.watts, r.note)
                for r in session.execute(select(MINUTES))}


def row(vcdn_id, minutes, requests, watts, note=None):
    return {"vcdn_id": vcdn_id, "minute": AT + dt.timedelta(minutes=minutes),
            "requests": requests, "watts": watts, "note": note}


def test_new_rows_are_inserted_and_taken_keys_add_up(database):
    upsert(database, [row("a", 0, 2**40, 1.5, "first"), row("a", 1, 3, 0),  # an int watts
                      row("b", 0, 7, 2.0)])
    upsert(database, [row("a", 0, 5, 0.5, None), row("b", 1, 1, 1.0, "new")])
    assert stored(database) == {
        ("a", AT): (2**40 + 5, 2.0, None),  # added up; the note is the new (absent) one
        ("a", AT + dt.timedelta(minutes=1)): (3, 0.0, None),
        ("b", AT): (7, 2.0, None),
        ("b", AT + dt.timedelta(minutes=1)): (1, 1.0, "new")}


def test_no_rows_write_nothing(database):
    upsert(database, [])
    assert stored(database) == {}


def test_a_failed_transaction_keeps_none_of_its_rows(database):
    upsert(database, [row("a", 0, 1, 1.0)])
    with pytest.raises(RuntimeError), database.transaction() as session:
        bulk.upsert(session, MINUTES, [row("a", 0, 10, 1.0), row("c", 0, 1, 1.0)],
                    ["vcdn_id", "minute"], add_up)
        raise RuntimeError("the pass failed before committing")
    assert stored(database) == {("a", AT): (1, 1.0, None)}


def test_two_upserts_of_one_table_in_one_transaction_each_count_once(database):
    with database.transaction() as session:
        for requests in (1, 2):
            bulk.upsert(session, MINUTES, [row("a", 0, requests, 0.0)], ["vcdn_id", "minute"],
                        add_up)
    assert stored(database) == {("a", AT): (3, 0.0, None)}


def test_inserted_rows_keep_their_types_and_nulls(database):
    with database.transaction() as session:
        bulk.insert(session, MINUTES, ("vcdn_id", "minute", "requests", "watts", "note"),
                    [("a", AT, 2**40, 1, "x"), ("b", AT, 0, 2.5, None)])
    assert stored(database) == {("a", AT): (2**40, 1.0, "x"), ("b", AT): (0, 2.5, None)}
