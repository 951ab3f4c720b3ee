"""The tenant export format and how rows move to another tenant id."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest

from memplane_server.core.transfer import (
    ExportedRow,
    ExportHeader,
    Retarget,
    TransferFormatError,
    decode_header,
    decode_row,
    encode_header,
    encode_row,
)

A, B, C = (str(uuid.UUID(int=i)) for i in (1, 2, 3))


def memory(id_: str, **fields) -> ExportedRow:
    return ExportedRow("memories", {"id": id_, "tenant_id": "src", "supersedes": None, "source_id": None,
                                    "sources": [], "content": "x", **fields})


def test_header_and_rows_read_back_as_written():
    header = ExportHeader("t1", 6, datetime(2026, 1, 1, tzinfo=timezone.utc))
    row = ExportedRow("memories", {"id": A, "content": "上海 \n \"q\"", "tags": ["a"]})
    assert decode_header(encode_header(header)) == header
    assert decode_row(encode_row(row), 2) == row


@pytest.mark.parametrize("line", ["not json", "[1]", '{"format": "other"}', '{"format": "memplane.tenant-export"}'])
def test_a_file_that_is_not_an_export_is_refused_at_its_header(line):
    with pytest.raises(TransferFormatError, match="line 1"):
        decode_header(line)


@pytest.mark.parametrize("line", ['{"table": "api_keys", "row": {}}', '{"table": "memories", "row": [1]}', "{"])
def test_a_row_of_an_unknown_table_or_shape_is_refused_with_its_line_number(line):
    with pytest.raises(TransferFormatError, match="line 7"):
        decode_row(line, 7)


def test_into_another_tenant_ids_are_new_and_every_reference_follows():
    move = Retarget("src", "dst", {A, B})
    old = memory(B, supersedes=A, source_id=A, sources=[{"type": "turn", "id": A}, {"type": "task", "id": "job-9"}])
    new = move.row(old).fields
    assert new["tenant_id"] == "dst"
    assert new["id"] == move.new_id(B) != B
    assert new["supersedes"] == new["source_id"] == new["sources"][0]["id"] == move.new_id(A)
    assert new["sources"][1] == {"type": "task", "id": "job-9"}


def test_history_rows_and_their_snapshots_follow_the_new_ids():
    move = Retarget("src", "dst", {A, B})
    history = ExportedRow("memory_history", {"tenant_id": "src", "memory_id": B, "seq": 4,
                                             "snapshot": memory(B, supersedes=A).fields})
    new = move.row(history).fields
    assert (new["tenant_id"], new["memory_id"], new["seq"]) == ("dst", move.new_id(B), 4)
    assert new["snapshot"] == move.row(memory(B, supersedes=A)).fields


def test_new_ids_depend_only_on_the_target_tenant_so_a_second_import_collides():
    assert Retarget("src", "dst", {A}).new_id(A) == Retarget("other", "dst", {A}).new_id(A)
    assert Retarget("src", "dst", {A}).new_id(A) != Retarget("src", "dst2", {A}).new_id(A)


def test_a_callers_own_source_id_is_not_taken_for_a_memory_reference():
    row = Retarget("src", "dst", {A}).row(memory(A, source_id=C)).fields
    assert row["source_id"] == C


def test_into_the_same_tenant_ids_stay_but_no_row_can_name_another_tenant():
    move = Retarget("src", "src", {A})
    assert move.row(memory(A, tenant_id="victim")).fields | {"tenant_id": None} == memory(A).fields | {"tenant_id": None}
    assert move.row(memory(A, tenant_id="victim")).fields["tenant_id"] == "src"
    assert move.row(ExportedRow("agents", {"tenant_id": "victim", "id": "a1"})).fields["tenant_id"] == "src"
    assert move.row(ExportedRow("tenants", {"id": "victim"})).fields["id"] == "src"
