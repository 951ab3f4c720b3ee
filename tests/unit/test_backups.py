"""Backup names, which backups are pruned, and the schema-version refusal."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memplane_server.core.backups import (
    SchemaTooNew,
    backup_name,
    check_schema_version,
    is_backup_name,
    names_to_prune,
)
from memplane_server.stores.postgres.bulk.dump import parse_schema_versions

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)


def test_backup_names_sort_in_the_order_backups_were_taken():
    times = [T0 + timedelta(microseconds=1), T0 + timedelta(days=400), T0, T0 + timedelta(seconds=1)]
    assert sorted(backup_name(t) for t in times) == [backup_name(t) for t in sorted(times)]


def test_backup_names_are_in_utc_whatever_the_clock_zone():
    shanghai = T0.astimezone(timezone(timedelta(hours=8)))
    assert backup_name(shanghai) == backup_name(T0) == "memplane-20260102T030405.678901Z.dump"


def test_pruning_keeps_the_newest_and_never_touches_other_files():
    names = [backup_name(T0 + timedelta(hours=h)) for h in range(9)]
    others = ["notes.txt", f".{names[0]}.partial", "memplane-latest.dump"]
    pruned = names_to_prune(list(reversed(names)) + others, keep=7)
    assert pruned == names[:2]
    assert not any(is_backup_name(n) for n in others)


def test_pruning_with_fewer_backups_than_kept_removes_nothing():
    assert names_to_prune([backup_name(T0)], keep=7) == []


def test_a_newer_schema_is_refused_with_both_versions_named():
    check_schema_version("backup b", 6, 6)
    with pytest.raises(SchemaTooNew, match=r"backup b has schema version 7, newer than this Memplane knows \(6\)"):
        check_schema_version("backup b", 7, 6)


def test_schema_versions_are_read_from_pg_restore_output():
    sql = (
        "SET statement_timeout = 0;\n"
        "COPY public.schema_migrations (version, name, applied_at) FROM stdin;\n"
        "1\t0001_init.sql\t2026-01-01 00:00:00+00\n"
        "12\t0012_future.sql\t2027-01-01 00:00:00+00\n"
        "\\.\n"
        "COPY public.other (version) FROM stdin;\n"
        "99\n"
        "\\.\n"
    )
    assert parse_schema_versions(sql) == [1, 12]
