"""The blocking SDK modules are generated from the asyncio ones (scripts/gen_sync_client.py)."""
from __future__ import annotations

import pytest

from scripts import gen_sync_client


def test_the_committed_blocking_modules_are_what_the_script_generates():
    stale = gen_sync_client.stale()
    assert not stale, f"stale, run scripts/gen_sync_client.py (make generate): {', '.join(p.name for p in stale)}"


def test_asyncio_code_that_no_rule_rewrites_is_refused():
    source = "import asyncio\n\n\nasync def both(a, b):\n    return await asyncio.gather(a, b)\n"
    with pytest.raises(ValueError, match="asyncio"):
        gen_sync_client.sync_source("aio.py", source)
