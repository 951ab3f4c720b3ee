"""The SDK's enum mirrors and their lenient parsing."""
from __future__ import annotations

import pytest

from memplane import (
    DomainAccess,
    EraseMode,
    HistoryAction,
    InferMode,
    Kind,
    Layer,
    MemoryStatus,
    OperationState,
    ReflectMode,
    Role,
    Scope,
    TaskOutcome,
)
from memplane.v1 import admin_service_pb2, memory_pb2, memory_service_pb2, operation_pb2

MIRRORS = [
    (Scope, memory_pb2.Scope),
    (Layer, memory_pb2.Layer),
    (Kind, memory_pb2.Kind),
    (MemoryStatus, memory_pb2.MemoryStatus),
    (HistoryAction, memory_service_pb2.HistoryAction),
    (Role, admin_service_pb2.Role),
    (DomainAccess, admin_service_pb2.DomainAccess),
    (OperationState, operation_pb2.OperationState),
    (TaskOutcome, memory_service_pb2.TaskOutcome),
    (InferMode, memory_service_pb2.InferMode),
    (ReflectMode, memory_service_pb2.ReflectMode),
    (EraseMode, memory_service_pb2.EraseMode),
]


@pytest.mark.parametrize(("mirror", "proto"), MIRRORS, ids=lambda x: getattr(x, "__name__", ""))
def test_mirror_has_exactly_the_proto_names_and_numbers(mirror, proto):
    expected = {v.name: v.number for v in proto.DESCRIPTOR.values}
    assert {mirror.proto_prefix() + m.name: m.value for m in mirror} == expected


@pytest.mark.parametrize("text", ["private", "PRIVATE", " Private ", "SCOPE_PRIVATE", "scope_private"])
def test_parse_accepts_short_and_full_names_in_any_case(text):
    assert Scope.parse(text) is Scope.PRIVATE


def test_parse_accepts_hyphens_for_underscores():
    assert DomainAccess.parse("read-write") is DomainAccess.READ_WRITE


def test_parse_accepts_members_and_proto_numbers():
    assert Kind.parse(Kind.FACT) is Kind.FACT
    assert Kind.parse(3) is Kind.FACT


def test_parse_rejects_unknown_names_listing_the_choices():
    with pytest.raises(ValueError, match="global, domain, private"):
        Scope.parse("public")


def test_parse_rejects_bools_even_though_they_are_ints():
    with pytest.raises(TypeError):
        Layer.parse(True)


def test_from_proto_reads_unknown_numbers_as_unspecified():
    assert Kind.from_proto(99) is Kind.UNSPECIFIED
