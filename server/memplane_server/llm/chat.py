"""The one way Memplane asks a chat model for structured output, through litellm: temperature 0,
top_p 0.9, the answer parsed by the caller's schema and asked for once more when malformed."""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from opentelemetry import metrics, trace

from ..core.access.attribution import work_tenant
from ..core.errors import Code, MemplaneError
from ..core.model import Kind
from .litellm_import import load_litellm
from .structured import Expected, OutputForm, response_format

log = logging.getLogger(__name__)
T = TypeVar("T")
_tracer = trace.get_tracer("memplane.llm")
_meter = metrics.get_meter("memplane.server")
_llm_time = _meter.create_histogram("memplane.llm.duration", unit="ms", description="time of one LLM completion")
_llm_tokens = _meter.create_counter("memplane.llm.tokens", unit="{token}", description="LLM tokens by tenant and stage")
# A stage that went on without the model's part (by stage and DEGRADED_REASON).
LLM_DEGRADED = _meter.create_counter("memplane.llm.degraded", unit="{call}",
                                     description="LLM stages done without the model (malformed answers, budget spent)")
# Reasons of a MemplaneError from ask_json after which a stage goes on with its LLM-free result
# rather than failing or being retried: asking again would not change the answer (a model that
# answered malformed twice at temperature 0, a tenant whose token budget is spent).
DEGRADING_REASONS = frozenset({"LLM_MALFORMED_OUTPUT", "LLM_BUDGET_EXHAUSTED"})
# The LLM_DEGRADED attribute naming which of DEGRADING_REASONS it was.
DEGRADED_REASON = "memplane.llm.reason"


class MalformedOutput(ValueError):
    """The model's answer does not follow the schema."""


def strip_fences(text: str) -> str:
    cleaned = text.strip()
    if cleaned.startswith("```"):
        cleaned = cleaned.strip("`").removeprefix("json").strip()
    return cleaned


def json_object(text: str, expected: str = "a JSON object") -> dict:
    """The model's answer as a JSON object; raises MalformedOutput otherwise, saying what was
    expected (so the caller's parse fails and ChatModel asks once more). A model without
    structured output wraps the object in fences or prose ("Here is the JSON: {...}"): the first
    object in the text is the answer."""
    cleaned = strip_fences(text)
    try:
        data = json.loads(cleaned)
    except json.JSONDecodeError as exc:
        start = cleaned.find("{")
        try:
            data, _ = json.JSONDecoder().raw_decode(cleaned[start:]) if start >= 0 else (None, 0)
        except json.JSONDecodeError:
            data = None
        if data is None:
            raise MalformedOutput(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise MalformedOutput(f"expected {expected}")
    return data


def json_answer(text: str, list_key: str) -> dict:
    """The model's answer as a JSON object holding a list under list_key."""
    data = json_object(text, f"an object with a {list_key!r} list")
    if not isinstance(data.get(list_key), list):
        raise MalformedOutput(f"expected an object with a {list_key!r} list")
    return data


def answer_items(data: dict, list_key: str, limit: int) -> list[dict]:
    """The first `limit` entries of the answer's list, each of which must be an object."""
    items = data[list_key][:limit]
    if not all(isinstance(item, dict) for item in items):
        raise MalformedOutput(f"each entry of {list_key!r} must be an object")
    return items


def answer_kind(item: dict, allowed: frozenset[Kind], default: str = "") -> Kind:
    try:
        kind = Kind(str(item.get("kind") or default).lower())
    except ValueError:
        raise MalformedOutput(f"unknown kind {item.get('kind')!r}") from None
    if kind not in allowed:
        raise MalformedOutput("kind must be one of " + "/".join(sorted(k.value for k in allowed)))
    return kind


def answer_confidence(item: dict, default: float) -> float:
    confidence = item.get("confidence", default)
    # bool is an int to Python, and NaN fails both comparisons.
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        raise MalformedOutput("confidence must be a number between 0 and 1")
    return float(confidence)


class ChatModel:
    def __init__(self, model: str, *, api_base: str | None, api_key: str | None, timeout: float,
                 structured_output: OutputForm = "json_schema") -> None:
        self._litellm = load_litellm()
        self.model = model
        self._kwargs = {k: v for k, v in {"api_base": api_base, "api_key": api_key}.items() if v}
        self._timeout = timeout
        self._form: OutputForm = structured_output

    async def ask_json(self, system: str, user: str, parse: Callable[[str], T], expected: Expected) -> T:
        """The parsed answer. The schema goes with the request (in the provider's form) and the
        answer is bounded by the stage's max_tokens; the parse is still the judge. A provider that
        fails, times out or answers malformed twice is a dependency that is down for this call:
        UNAVAILABLE with a reason, retried by clients and by the job runner, never an INTERNAL error."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        extra = {"max_tokens": expected.max_tokens, **response_format(self._form, expected.name, expected.schema)}
        for attempt in range(2):
            try:
                response = await self._complete(messages, extra, expected.name)
            except Exception as exc:  # litellm raises its own hierarchy and plain network errors
                raise MemplaneError(Code.UNAVAILABLE, "LLM_UNAVAILABLE",
                                    f"the model {self.model} did not answer ({type(exc).__name__})") from exc
            text = response.choices[0].message.content or ""
            try:
                return parse(text)
            except MalformedOutput as exc:
                log.warning("model %s returned malformed output (attempt %d): %s", self.model, attempt + 1, exc)
                if attempt:
                    raise MemplaneError(Code.UNAVAILABLE, "LLM_MALFORMED_OUTPUT",
                                        f"the model {self.model} answered twice without the expected JSON: {exc}") from exc
                messages = [*messages, {"role": "assistant", "content": text},
                            {"role": "user", "content": f"That was invalid ({exc}). Answer again with only the JSON object."}]
        raise AssertionError("unreachable")

    async def _complete(self, messages: list[dict], extra: dict, stage: str):
        """One completion, traced and timed; its tokens counted for the tenant whose work it does.
        Prompts and answers are never recorded (they hold memory content)."""
        attributes = {"gen_ai.request.model": self.model, "memplane.llm.stage": stage}
        start = time.perf_counter()
        with _tracer.start_as_current_span("llm chat", kind=trace.SpanKind.CLIENT, attributes=attributes):
            try:
                response = await self._litellm.acompletion(
                    model=self.model, messages=messages, temperature=0, top_p=0.9, timeout=self._timeout,
                    num_retries=0, **self._kwargs, **extra,
                )
            finally:
                _llm_time.record((time.perf_counter() - start) * 1000, attributes)
        usage = getattr(response, "usage", None)
        tenant = work_tenant()
        for kind, used in (("input", getattr(usage, "prompt_tokens", 0)), ("output", getattr(usage, "completion_tokens", 0))):
            if used:
                _llm_tokens.add(used, {**attributes, "memplane.tenant": tenant, "gen_ai.token.type": kind})
        return response
