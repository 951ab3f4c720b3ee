"""Content policy rules without I/O: which action a detector takes (defaults, categories, domains,
derived writes), what screening a memory stores, and how the dry-run report classifies it."""
from __future__ import annotations

import pytest

from memplane_server.core.content.policy import (
    Action,
    Actions,
    check_rules,
    domain_policy,
    rules_from_json,
    stricter,
    tenant_policy,
)
from memplane_server.core.content.scan import ScanReport
from memplane_server.core.content.screen import explain_tags, screen
from memplane_server.core.errors import MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, Scope, SearchHit
from tests.unit.test_stored_rows import record

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
EMAIL = "li.wei@example.cn"


def draft(content: str, **fields) -> MemoryDraft:
    return MemoryDraft(scope=fields.pop("scope", Scope.GLOBAL), domain=fields.pop("domain", None), agent_id=None,
                       layer=None, kind=Kind.FACT, content=content, **fields)


def test_stricter_picks_the_later_of_off_tag_redact_refuse():
    assert stricter(Action.TAG, Action.REDACT) is Action.REDACT
    assert stricter(Action.REFUSE, Action.OFF) is Action.REFUSE


def test_a_tenant_without_rules_redacts_secrets_and_tags_personal_data():
    policy = tenant_policy({})
    assert policy.action("aws_access_key") is Action.REDACT and policy.action("phone") is Action.TAG


def test_a_detectors_rule_overrides_its_categorys():
    policy = tenant_policy({"personal": Action.REFUSE, "email": Action.OFF})
    assert policy.action("email") is Action.OFF and policy.action("iban") is Action.REFUSE


def test_a_domain_memory_takes_the_stricter_of_tenant_and_domain():
    actions = Actions(tenant_policy({"email": Action.REFUSE, "phone": Action.OFF}),
                      {"shared": domain_policy({"email": Action.TAG})})
    assert actions.action("email", "shared") is Action.REFUSE
    assert actions.action("phone", "shared") is Action.REDACT  # the domain default
    assert actions.action("phone", None) is Action.OFF


def test_a_derived_write_redacts_what_a_callers_write_would_refuse():
    actions = Actions(tenant_policy({"secret": Action.REFUSE}), derived=True)
    assert actions.action("jwt", None) is Action.REDACT


@pytest.mark.parametrize("rules, reason", [({"ssn": "redact"}, "UNKNOWN_DETECTOR"),
                                           ({"email": "hide"}, "INVALID_CONTENT_ACTION")])
def test_rules_name_known_detectors_and_actions(rules, reason):
    with pytest.raises(MemplaneError) as caught:
        check_rules(rules)
    assert caught.value.reason == reason


def test_a_stored_rule_for_a_detector_no_longer_known_is_ignored():
    assert rules_from_json({"email": "off", "retired_detector": "refuse"}) == {"email": Action.OFF}


def test_redaction_replaces_only_what_was_found_with_a_typed_placeholder():
    screened = screen(draft(f"key {AWS_KEY} for {EMAIL}"), Actions(tenant_policy({"personal": Action.REDACT})))
    assert screened.draft.content == "key [REDACTED:aws_access_key] for [REDACTED:email]"
    assert [(h.field, h.detector) for h in screened.hits] == [("content", "aws_access_key"), ("content", "email")]


def test_tagging_keeps_the_text_and_adds_one_tag_per_detector():
    screened = screen(draft(f"{EMAIL} and {EMAIL}", tags=("people",)), Actions(tenant_policy({})))
    assert screened.draft.content == f"{EMAIL} and {EMAIL}"
    assert screened.draft.tags == ("people", "content:email")


def test_metadata_keys_and_nested_strings_are_screened_with_their_path():
    screened = screen(draft("note", metadata={"a": [{"b": AWS_KEY}], AWS_KEY: True}), Actions(tenant_policy({})))
    assert screened.draft.metadata == {"a": [{"b": "[REDACTED:aws_access_key]"}], "[REDACTED:aws_access_key]": True}
    assert {h.field for h in screened.hits} == {"metadata.a[0].b", "metadata key"}


def test_a_refused_finding_is_reported_without_changing_the_draft():
    original = draft(f"key {AWS_KEY}")
    screened = screen(original, Actions(tenant_policy({"secret": Action.REFUSE})))
    assert screened.refused is not None and screened.refused.detector == "aws_access_key"


def test_a_draft_with_nothing_found_is_returned_as_it_came():
    original = draft("the user prefers tea")
    assert screen(original, Actions(tenant_policy({}))).draft is original


def test_the_scan_report_lists_a_memory_under_its_strictest_change():
    report = ScanReport()
    actions = Actions(tenant_policy({"email": Action.REFUSE, "phone": Action.TAG}))
    report.add("m1", screen(draft(f"{EMAIL} {AWS_KEY}"), actions), ())
    report.add("m2", screen(draft(f"key {AWS_KEY}"), actions), ())
    report.add("m3", screen(draft("call +1 415 555 0132"), actions), ("content:phone",))  # tagged already
    assert report.examined == 3 and report.ids == {Action.REFUSE: ["m1"], Action.REDACT: ["m2"]}
    assert report.counts[("aws_access_key", Action.REDACT)] == 2


def test_search_explains_a_hit_the_policy_tagged():
    hit = SearchHit(record(content="x", tags=["content:email", "people"]), 1.0)
    explain_tags([hit])
    assert [c.name for c in hit.explanation] == ["content_policy"] and "email" in hit.explanation[0].detail


def test_a_random_looking_token_is_only_tagged_by_default_but_follows_a_secret_rule():
    assert tenant_policy({}).action("high_entropy_token") is Action.TAG
    assert tenant_policy({"secret": Action.REDACT}).action("high_entropy_token") is Action.REDACT
