"""How each LLM stage tells a provider the schema of its answer (llm/structured.py)."""
from __future__ import annotations

import pytest

from memplane_server.llm import consolidation, digest, extraction, query_rewrite, reflection, rerank, summary
from memplane_server.llm.structured import response_format

SCHEMA = {"type": "object"}


def test_openai_form_names_the_schema():
    assert response_format("json_schema", "ops", SCHEMA) == {
        "response_format": {"type": "json_schema", "json_schema": {"name": "ops", "schema": SCHEMA}}}


def test_llama_cpp_form_puts_the_schema_beside_json_mode():
    assert response_format("json_object_schema", "ops", SCHEMA) == {
        "response_format": {"type": "json_object", "schema": SCHEMA}}


def test_json_mode_and_off_send_no_schema():
    assert response_format("json_object", "ops", SCHEMA) == {"response_format": {"type": "json_object"}}
    assert response_format("off", "ops", SCHEMA) == {}


@pytest.mark.parametrize("expected", [
    extraction.EXPECTED, reflection.EXPECTED, consolidation.EXPECTED, digest.EXPECTED, summary.EXPECTED,
    query_rewrite.EXPECTED, rerank.expected(30),
])
def test_every_stage_bounds_its_lists_and_its_length(expected):
    def arrays(node):
        if isinstance(node, dict):
            if node.get("type") == "array":
                yield node
            for value in node.values():
                yield from arrays(value)

    assert expected.schema["type"] == "object" and expected.max_tokens > 0
    assert all("maxItems" in a for a in arrays(expected.schema))
