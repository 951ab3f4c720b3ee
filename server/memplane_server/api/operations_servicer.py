"""OperationsService: protobuf in, use case, protobuf out."""
from __future__ import annotations

from memplane.v1 import operations_service_pb2 as ospb
from memplane.v1 import operations_service_pb2_grpc as ospb_grpc

from ..services.registry import Services
from .context import current_caller
from .convert import enum_in
from .operation_convert import STATES, operation_out

_STATE_NAMES = {number: name for name, number in STATES.items()}


class OperationsServicer(ospb_grpc.OperationsServiceServicer):
    def __init__(self, services: Services) -> None:
        self.operations = services.operations

    async def GetOperation(self, request: ospb.GetOperationRequest, context) -> ospb.GetOperationResponse:
        response = ospb.GetOperationResponse()
        operation_out(await self.operations.get(current_caller(), request.id), response.operation)
        return response

    async def ListOperations(self, request: ospb.ListOperationsRequest, context) -> ospb.ListOperationsResponse:
        state = enum_in(_STATE_NAMES, request.state, "state")
        ops, token = await self.operations.list(current_caller(), state, request.page_size, request.page_token)
        response = ospb.ListOperationsResponse(next_page_token=token)
        for op in ops:
            operation_out(op, response.operations.add())
        return response

    async def CancelOperation(self, request: ospb.CancelOperationRequest, context) -> ospb.CancelOperationResponse:
        response = ospb.CancelOperationResponse()
        operation_out(await self.operations.cancel(current_caller(), request.id), response.operation)
        return response


