import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OperationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATION_STATE_UNSPECIFIED: _ClassVar[OperationState]
    OPERATION_STATE_PENDING: _ClassVar[OperationState]
    OPERATION_STATE_RUNNING: _ClassVar[OperationState]
    OPERATION_STATE_SUCCEEDED: _ClassVar[OperationState]
    OPERATION_STATE_FAILED: _ClassVar[OperationState]
    OPERATION_STATE_CANCELLED: _ClassVar[OperationState]
OPERATION_STATE_UNSPECIFIED: OperationState
OPERATION_STATE_PENDING: OperationState
OPERATION_STATE_RUNNING: OperationState
OPERATION_STATE_SUCCEEDED: OperationState
OPERATION_STATE_FAILED: OperationState
OPERATION_STATE_CANCELLED: OperationState

class Operation(_message.Message):
    __slots__ = ("id", "type", "state", "attempts", "error_reason", "error_message", "create_time", "update_time", "result_memory_ids", "result_summary", "erasure_receipt")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    RESULT_MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    RESULT_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    ERASURE_RECEIPT_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    state: OperationState
    attempts: int
    error_reason: str
    error_message: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    result_memory_ids: _containers.RepeatedScalarFieldContainer[str]
    result_summary: str
    erasure_receipt: ErasureReceipt
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., state: _Optional[_Union[OperationState, str]] = ..., attempts: _Optional[int] = ..., error_reason: _Optional[str] = ..., error_message: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., result_memory_ids: _Optional[_Iterable[str]] = ..., result_summary: _Optional[str] = ..., erasure_receipt: _Optional[_Union[ErasureReceipt, _Mapping]] = ...) -> None: ...

class ErasureReceipt(_message.Message):
    __slots__ = ("operation_id", "erase_time", "subject", "counts", "dry_run")
    class CountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    ERASE_TIME_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    erase_time: _timestamp_pb2.Timestamp
    subject: str
    counts: _containers.ScalarMap[str, int]
    dry_run: bool
    def __init__(self, operation_id: _Optional[str] = ..., erase_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., subject: _Optional[str] = ..., counts: _Optional[_Mapping[str, int]] = ..., dry_run: _Optional[bool] = ...) -> None: ...
