"""Generated protobuf and gRPC modules of the memplane.v1 API (do not edit; see scripts/gen_proto.py)."""
