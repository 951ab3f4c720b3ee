"""What each LLM stage expects back (a JSON schema and a bound on its length), and the one place
that says how a provider is told: providers differ in how a schema is sent."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

# json_schema: OpenAI's response_format (litellm translates it for the providers that take one);
# json_object_schema: llama.cpp's server (it refuses the json_schema form, and enforces this one
# with a grammar); json_object: JSON mode without a schema; off: the prompt alone.
OutputForm = Literal["json_schema", "json_object_schema", "json_object", "off"]


@dataclass(frozen=True)
class Expected:
    name: str  # the schema's name, [a-z_]
    schema: dict[str, Any]
    max_tokens: int  # an answer cut there is malformed: item caps in the schema keep it short of that


# Each LLM stage by the name of the schema it asks for (Expected.name): the stage names settings
# route by (MEMPLANE_LLM_STAGE_MODELS) and that usage and metrics are counted under. The schema
# names stay what the model is told ("operations" reads better to it than "extraction").
# settings.LLM_STAGES lists the same names (settings imports nothing of the server; a unit test
# holds the two together).
STAGE_OF_SCHEMA = {
    "operations": "extraction", "reflection": "reflection", "summary": "summary", "consolidation": "consolidation",
    "digest": "digest", "queries": "query_rewrite", "ranking": "rerank",
}


def stage_of(expected: Expected) -> str:
    """The stage asking; a schema of no known stage (a test's) counts under its own name."""
    return STAGE_OF_SCHEMA.get(expected.name, expected.name)


def response_format(form: OutputForm, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The completion's arguments that ask for the schema, in the provider's form."""
    if form == "json_schema":
        return {"response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}}
    if form == "json_object_schema":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if form == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}


def string(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length}


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or list(properties),
            "additionalProperties": False}


def array(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items}


CONFIDENCE = {"type": "number", "minimum": 0, "maximum": 1}
