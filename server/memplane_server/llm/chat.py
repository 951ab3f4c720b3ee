"""The one way Memplane asks a chat model for structured output, through litellm: temperature 0,
top_p 0.9, the answer parsed by the caller's schema and asked for once more when malformed; each
stage's model (llm/routing.py) tried first, the fallbacks when it fails; a tenant's tokens counted
and its daily budget checked (llm/ledger.py) before anything is sent."""
from __future__ import annotations

import contextvars
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from opentelemetry import metrics, trace

from ..core.access.attribution import work_tenant
from ..core.errors import Code, MemplaneError
from ..core.model import Kind
from .ledger import TokenLedger
from .litellm_import import load_litellm
from .routing import Endpoint, Routing
from .structured import Expected, OutputForm, response_format, stage_of

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



def went_without(stage: str, exc: BaseException) -> str | None:
    """The reason when exc is one of DEGRADING_REASONS, counted in LLM_DEGRADED; None for any other
    failure (which the stage handles as it always did)."""
    reason = exc.reason if isinstance(exc, MemplaneError) else None
    if reason not in DEGRADING_REASONS:
        return None
    LLM_DEGRADED.add(1, {"memplane.llm.stage": stage, DEGRADED_REASON: reason})
    return reason


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


# Which model answered the last ask_json in this task (a fallback, maybe), for what records it.
_answered_by: contextvars.ContextVar[str] = contextvars.ContextVar("memplane_llm_answered_by", default="")


def answered_by() -> str:
    """The model that answered this task's last ask_json; "" before any."""
    return _answered_by.get()


class ChatModel:
    """The chat models of every stage: the stage's own or the default one (`model`), then the
    fallbacks; a tenant's tokens counted (and its budget checked) in the ledger when there is one."""

    def __init__(self, model: str, *, api_base: str | None, api_key: str | None, timeout: float,
                 structured_output: OutputForm = "json_schema", stages: Mapping[str, Endpoint] | None = None,
                 fallbacks: tuple[Endpoint, ...] = (), ledger: TokenLedger | None = None) -> None:
        self._litellm = load_litellm()
        self.routing = Routing(Endpoint(model, api_base, api_key, structured_output), stages or {}, fallbacks)
        self._timeout = timeout
        self._ledger = ledger

    async def ask_json(self, system: str, user: str, parse: Callable[[str], T], expected: Expected) -> T:
        """The parsed answer. The schema goes with the request (in the provider's form) and the
        answer is bounded by the stage's max_tokens; the parse is still the judge. A tenant whose
        token budget is spent is refused before anything is sent: RESOURCE_EXHAUSTED
        LLM_BUDGET_EXHAUSTED. A model that fails or times out hands the call to the next in the
        stage's chain; when all did, or the one that answered did so malformed twice, it is a
        dependency that is down for this call: UNAVAILABLE with a reason, retried by clients and by
        the job runner, never an INTERNAL error. A malformed answer is asked again of the same model,
        never of a fallback: a format the stage's model cannot follow is the stage's to handle."""
        stage, tenant = stage_of(expected), work_tenant()
        if self._ledger is not None and tenant:
            await self._ledger.check(tenant)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        chain = self.routing.chain(stage)
        for attempt in range(2):
            response, endpoint = await self._first_answer(chain, messages, expected, stage)
            _answered_by.set(endpoint.model)
            text = response.choices[0].message.content or ""
            try:
                return parse(text)
            except MalformedOutput as exc:
                log.warning("model %s returned malformed output (attempt %d): %s", endpoint.model, attempt + 1, exc)
                if attempt:
                    raise MemplaneError(Code.UNAVAILABLE, "LLM_MALFORMED_OUTPUT",
                                        f"the model {endpoint.model} answered twice without the expected JSON: {exc}"
                                        ) from exc
                chain = chain[chain.index(endpoint):]
                messages = [*messages, {"role": "assistant", "content": text},
                            {"role": "user", "content": f"That was invalid ({exc}). Answer again with only the JSON object."}]
        raise AssertionError("unreachable")

    async def _first_answer(self, chain: list[Endpoint], messages: list[dict], expected: Expected, stage: str):
        """The first answer along the chain, and the endpoint that gave it."""
        failures, last = [], None
        for endpoint in chain:
            extra = {"max_tokens": expected.max_tokens,
                     **response_format(endpoint.form, expected.name, expected.schema)}
            try:
                return await self._complete(endpoint, messages, extra, stage), endpoint
            except Exception as exc:  # litellm raises its own hierarchy and plain network errors
                failures.append(f"{endpoint.model} ({type(exc).__name__})")
                if len(failures) < len(chain):
                    log.warning("model %s did not answer (%s); trying the next", endpoint.model, type(exc).__name__)
                last = exc
        raise MemplaneError(Code.UNAVAILABLE, "LLM_UNAVAILABLE",
                            "no model answered: " + ", ".join(failures)) from last

    async def _complete(self, endpoint: Endpoint, messages: list[dict], extra: dict, stage: str):
        """One completion, traced and timed; its tokens counted for the tenant whose work it does.
        Prompts and answers are never recorded (they hold memory content)."""
        attributes = {"gen_ai.request.model": endpoint.model, "memplane.llm.stage": stage}
        start = time.perf_counter()
        with _tracer.start_as_current_span("llm chat", kind=trace.SpanKind.CLIENT, attributes=attributes) as span:
            try:
                response = await self._litellm.acompletion(
                    model=endpoint.model, messages=messages, temperature=0, top_p=0.9, timeout=self._timeout,
                    num_retries=0, **{k: v for k, v in {"api_base": endpoint.api_base, "api_key": endpoint.api_key
                                                        }.items() if v}, **extra,
                )
            finally:
                _llm_time.record((time.perf_counter() - start) * 1000, attributes)
            span.set_attribute("gen_ai.response.model", getattr(response, "model", None) or endpoint.model)
        usage = getattr(response, "usage", None)
        tenant = work_tenant()
        used = {"input": getattr(usage, "prompt_tokens", 0) or 0, "output": getattr(usage, "completion_tokens", 0) or 0}
        for kind, count in used.items():
            if count:
                _llm_tokens.add(count, {**attributes, "memplane.tenant": tenant, "gen_ai.token.type": kind})
        if self._ledger is not None and tenant and (used["input"] or used["output"]):
            try:
                await self._ledger.record(tenant, stage, endpoint.model, used["input"], used["output"])
            except Exception:  # the answer is paid for: losing it to a failed count would spend twice
                log.exception("recording %d+%d tokens of tenant %s failed", used["input"], used["output"], tenant)
        return response
