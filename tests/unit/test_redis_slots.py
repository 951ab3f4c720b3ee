"""Redis Cluster runs a Lua script or MULTI only when all its keys hash to one slot (else CROSSSLOT).
Every Redis store module lists its scripts and MULTIs with the keys each takes (OPERATION_KEYS, the
builders the store itself uses); these tests compute the cluster slot of each key, and check by
reading the modules that no script or MULTI is left out of those lists."""
from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil

from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

import memplane_server.stores.redis as redis_stores
from memplane_server.core.access.requests import RequestKey
from memplane_server.stores.redis.working import WorkingSession

MODULES = [importlib.import_module(f"{redis_stores.__name__}.{m.name}")
           for m in pkgutil.iter_modules(redis_stores.__path__)]

tenant_ids = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,62}", fullmatch=True)
# Caller-chosen ids are any text without NUL, braces and colons included; protobuf strings are
# UTF-8, so no lone surrogate (category Cs) can arrive.
free_ids = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
sessions = st.builds(WorkingSession, tenant_ids, st.none() | tenant_ids, free_ids)
request_keys = st.builds(RequestKey, st.text("0123456789abcdef", min_size=64, max_size=64), st.text(max_size=8))

# What each module's key builders take: a module with scripts but no entry here fails below.
SUBJECTS = {"working": sessions, "idempotency": request_keys, "rate_limit": free_ids}


def scripts_and_multis(module) -> int:
    """register_script calls and pipelines that are transactions (redis-py's default) in its source."""
    found = 0
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "register_script":
                found += 1
            elif node.func.attr == "pipeline" and not any(
                    k.arg == "transaction" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in node.keywords):
                found += 1
    return found


def test_every_script_and_multi_of_the_redis_stores_lists_its_keys():
    for module in MODULES:
        assert scripts_and_multis(module) == len(getattr(module, "OPERATION_KEYS", {})), module.__name__


@given(st.data())
def test_the_keys_of_each_script_and_multi_share_one_cluster_slot(data):
    for module in MODULES:
        operations = getattr(module, "OPERATION_KEYS", {})
        if not operations:
            continue
        subject = data.draw(SUBJECTS[module.__name__.rsplit(".", 1)[1]])
        for name, keys_of in operations.items():
            keys = keys_of(subject)
            assert len({key_slot(k.encode()) for k in keys}) == 1, (module.__name__, name, keys)


def test_a_session_and_its_tenant_index_share_a_slot_another_tenant_may_not():
    """The tag is the tenant: the check above is not passing because every key lands in one slot."""
    a, b = WorkingSession("tenant-a", None, "s"), WorkingSession("tenant-b", "x", "s")
    assert key_slot(a.key("items").encode()) != key_slot(b.key("items").encode())
