"""Domain types and rules: no gRPC, no SQL, no I/O."""
