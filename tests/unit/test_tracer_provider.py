"""Spans are recorded only when an exporter sends them."""
from __future__ import annotations

from opentelemetry.sdk.resources import Resource

from memplane_server.telemetry import make_tracer_provider


def test_spans_are_not_recorded_without_an_exporter():
    tracer = make_tracer_provider("none", Resource.create({})).get_tracer("t")
    with tracer.start_as_current_span("rpc") as parent:
        child = tracer.start_span("postgresql SELECT")
    assert not parent.is_recording() and not child.is_recording()
    assert parent.get_span_context().trace_id != 0  # the context still passes on


def test_spans_are_recorded_for_an_exporter():
    assert make_tracer_provider("otlp", Resource.create({})).get_tracer("t").start_span("rpc").is_recording()
