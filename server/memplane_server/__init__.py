"""Memplane server: multi-tenant memory for LLM agents, served over gRPC."""

import os

# The server only forks to run another program (subprocess, multiprocessing's spawn). gRPC's fork
# handlers, which its core runs by default, then only act in a child about to exec, and with calls
# in flight they crashed it now and then before it did (tests/e2e/test_faults.py: "Fatal Python
# error: Segmentation fault" in 4 of 7 runs, none in 10 with them off). Set before gRPC
# is first imported; an environment that sets the variable keeps its own value.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

__version__ = "0.1.0"
