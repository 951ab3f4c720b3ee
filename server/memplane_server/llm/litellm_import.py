"""Imports litellm without letting it reach for the network at import time."""
from __future__ import annotations

import os
from types import ModuleType


def load_litellm() -> ModuleType:
    # litellm downloads a model cost map at import unless told to use its bundled copy.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    return litellm
