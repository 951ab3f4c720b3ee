"""Whether a memory a model distilled from a task or a session may be stored: it must cite the
entries it comes from (core/reflection/transcript.py) and be faithful to them. The model proposes,
Memplane decides: a memory that fails is dropped, so a weak model leaves memory less complete, never
wrong. Seen from the packaged 1.5B model: "never travels before 8am" stored as "always travels
before 8am", narrations of the steps and raw tool calls stored as lessons, and a line of its own
prompt ("store the procedure that finally worked, as concrete steps") stored as a memory.
"""
from __future__ import annotations

import re
import unicodedata

from ..model import Kind
from ..retrieval.tokens import keyword_tokens
from .polarity import Clause, clauses, opposite, overlap
from .transcript import Entry

# Why a memory was dropped (the reason attribute of memplane.reflection.memories_dropped).
NO_CITATION = "no_citation"  # it cites no entry
UNKNOWN_ENTRY = "unknown_entry"  # it cites an entry that does not exist
TOOL_CALL = "tool_call"  # it is a raw tool call or JSON
NARRATION = "narration"  # a lesson or procedure that tells the steps instead of advising
PROMPT_ECHO = "prompt_echo"  # it repeats the prompt's own words
UNGROUNDED = "ungrounded"  # it holds a number or name nothing the model read holds
CONTRADICTS = "contradicts_entries"  # it says the opposite of what its entries say
COPIES_FAILURE = "copies_a_failed_step"  # a procedure that has the agent do again what failed

# An observation that reports a failure.
_FAILED = re.compile(r"\b(?:errors?|fail(?:ed|s|ure)?|exceeded|denied|refused|forbidden|timed out|timeout|not found"
                     r"|crash\w*|[45]\d\d)\b|失败|报错|错误|拒绝|超时|超出|异常", re.IGNORECASE)
_OBSERVATION = "\n    Observation: "

_JSON = re.compile(r"""\{\s*["'][^"'\n]{1,60}["']\s*:""")
_CALL = re.compile(r"""\b[A-Za-z_][\w.]*\(\s*(?:[A-Za-z_]\w*\s*=|["'{\[\d])""")
# "In step 2", "step 2 failed", "[2]": the transcript's steps told, not steps to take ("Step 1: ...").
_STEP_REFERENCE = re.compile(r"\b(?:in|at|from|after|before|of|on|during)\s+steps?\s*#?\d+|"
                             r"\bsteps?\s*#?\d+\s+(?:failed|succeeded|returned|was|showed|gave|did)\b|"
                             r"\[\d+\]|第\s*\d+\s*步")
# The numbering of a procedure's steps ("1. ...", "Step 2: ..."): not a number it claims.
# The transcript's entry numbers, which the model also writes into a memory's text ("context: [3], [4]").
_CITATION = re.compile(r"[\[【]\d+[\]】]")
# A list's own numbering, after a space or a Chinese full stop ("。2。" numbers, it claims nothing).
_ENUMERATOR = re.compile(r"(?:^|(?<=[\s;,。；，]))(?:step\s*)?\d+\s*[.):。、．）](?=\s|[^\x00-\x7f])",
                         re.IGNORECASE)
_PAST = (r"(?!need\b|feed\b|proceed\b|succeed\b|exceed\b|speed\b)(?:[a-z]+ed|ran|got|went|tried|made|saw|sent|"
         r"found|took|did|wrote|began|paid|bought|built|chose|gave|kept|left|put|read|set|told|said|came)\b")
_AGENT_DID = re.compile(r"\b(?:i|we|the agent|the assistant)\s+(?:(?:first|then|also|next|finally|again)\s+)?" + _PAST)
_DID_AT_START = re.compile(r"(?:^|[.;,]|\bthen\b|\band\b)\s*(?:(?:first|then|next|finally|afterwards|after that),?\s+)?"
                           + _PAST)
_AGENT_DID_ZH = re.compile(r"(?:我们|我|助手|智能体|代理)[^，。；,.;]{0,12}了|然后[^，。；,.;]{0,12}了")
# A clause that states a rule or a wish: what a lesson or a procedure can contradict. A lesson turns
# what went wrong into advice ("migrations not applied" becomes "apply migrations first"), so the
# polarity of a mere observation says nothing about it.
_RULE = re.compile(r"\b(?:never|always|dont|do not|should|shouldnt|must|please|prefers?|wants?|likes?|needs?|"
                   r"avoid|make sure|ensure|remember|only)\b|不要|别|从不|总是|必须|应该|请|喜欢|想要|需要|务必|记得|只")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
# Not from inside a word: the "T10" of "2026-12-08T10:00" is no name of its own (a CJK character
# before it is a word boundary: "写入openpyxl").
_NAME = re.compile(r"`[^`\n]+`|(?<![A-Za-z0-9_-])(?:--?[A-Za-z][\w.-]*|[A-Za-z_][\w./@-]*[\w]|[A-Za-z])")
# Latin abbreviations: dotted, but prose ("e.g. 8G" held the 1.5B model's lesson ungrounded).
_ABBREVIATION = re.compile(r"(?:e\.g|i\.e|etc|vs|cf|a\.m|p\.m)", re.IGNORECASE)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\"'(\n。！？：；，]\s*)$")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_TOKEN = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff]")
ECHO_WORDS = 5


def why_dropped(kind: Kind, content: str, cites: tuple[int, ...], entries: list[Entry],
                instructions: str) -> str | None:
    """Why the memory is not stored (one of the reasons above), or None when it may be.
    entries: all the model read; instructions: the prompt it was given."""
    if not cites:
        return NO_CITATION
    numbered = {e.number: e for e in entries}
    # One entry number too many beside real ones is a slip of the pen (the 1.5B model cited [2, 4] of
    # three steps); what the memory says is still held to everything it read below. Citing nothing
    # that exists is not.
    cited = [numbered[n] for n in dict.fromkeys(cites) if n in numbered]
    if not cited:
        return UNKNOWN_ENTRY
    if _JSON.search(content) or _CALL.search(content):
        return TOOL_CALL
    if kind in (Kind.LESSON, Kind.PROCEDURE) and narrates(content):
        return NARRATION
    if echoes(content, instructions, " ".join(e.text for e in entries)):
        return PROMPT_ECHO
    # A name or number of the trajectory's, cited or not: the 1.5B model cited one step of three and
    # named the tool of another (measured: most of its lessons were dropped when only the cited
    # steps counted). One it read nowhere is invented.
    if ungrounded(content, "\n".join(e.text for e in entries), words=kind not in (Kind.LESSON, Kind.PROCEDURE)):
        return UNGROUNDED
    if kind is Kind.PROCEDURE and copies_failure(content, entries):
        return COPIES_FAILURE
    # The user's own words are the authority on what they want: checked against, cited or not.
    if contradicts(kind, content, cited + [e for e in entries if e.users_words and e not in cited]):
        return CONTRADICTS
    return None


def kept_context(kind: Kind, context: str, entries: list[Entry], instructions: str) -> str:
    """The context stored with a memory that may be stored: when it applies. One that is a tool call,
    echoes the prompt or holds a name or number nothing read holds is left out, not the memory with
    it: the 1.5B model wrote its task focus ("The task succeeded after 1 retry: store a lesson ...")
    as the context of good lessons, and the "1" in it, read in no entry, dropped them as ungrounded."""
    shown = "\n".join(e.text for e in entries)
    if (_JSON.search(context) or _CALL.search(context) or echoes(context, instructions, shown)
            or ungrounded(context, shown, words=kind not in (Kind.LESSON, Kind.PROCEDURE))):
        return ""
    return context


def failed_actions(entries: list[Entry]) -> list[str]:
    """The actions of steps whose observation reports a failure and that no later step repeats with
    success ("run deploy" failed, then succeeded after the migrations: not a failed action)."""
    steps = [(*e.text.split(_OBSERVATION, 1), "")[:2] for e in entries if e.label.startswith("step ")]
    return [action for i, (action, seen) in enumerate(steps) if _FAILED.search(seen) and not any(
        _plain(later) == _plain(action) and not _FAILED.search(then) for later, then in steps[i + 1:])]


def copies_failure(content: str, entries: list[Entry]) -> bool:
    """A procedure holding, word for word, the action of a step that failed (four words or more):
    the 1.5B model wrote the steps of a rate-limited task as its procedure, "GET ... for all 40 repos
    in parallel; retry immediately; ...", the two actions that failed first."""
    plain = _plain(content)
    return any(len(_TOKEN.findall(_plain(a))) >= 4 and _plain(a) in plain for a in failed_actions(entries))


def _plain(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().replace("’", "'").replace("n't", "nt")


def narrates(content: str) -> bool:
    """Tells what was done ("First I called X, then Y"; "In step 2 ...") instead of what to do."""
    plain = _plain(content)
    return bool(_STEP_REFERENCE.search(plain) or _AGENT_DID.search(plain) or _AGENT_DID_ZH.search(plain)
                or len(_DID_AT_START.findall(plain)) >= 2)


def echoes(content: str, instructions: str, shown: str) -> bool:
    """Repeats ECHO_WORDS words in a row of the prompt (all of a shorter memory's, three at least),
    most of whose words the model read nowhere else: it took them from its instructions, not from
    the experience. (A lesson in the prompt's form, "next time, ...", about what it read is kept.)"""
    mine = _TOKEN.findall(_plain(content))
    theirs = _TOKEN.findall(_plain(instructions))
    read = set(keyword_tokens(shown)) | set(_CJK.findall(shown))
    n = min(ECHO_WORDS, len(mine))
    if n < 3:
        return False
    prompt = {tuple(theirs[i:i + n]) for i in range(len(theirs) - n + 1)}

    def unread(gram: tuple[str, ...]) -> bool:
        words = [t for w in gram for t in (keyword_tokens(w) or ())]
        return 2 * sum(w not in read for w in words) > len(words)

    return any(gram in prompt and unread(gram) for gram in (tuple(mine[i:i + n]) for i in range(len(mine) - n + 1)))


def _numbers(text: str) -> set[str]:
    # "8:00" is the 8 of "8am"; "1,000" is 1000; "08" is 8.
    return {re.sub(r"(?::00)+$", "", n.replace(",", "")).lstrip("0") or "0" for n in _NUMBER.findall(text)}


def _names(text: str, *, words: bool = True) -> list[str]:
    """Identifiers (--flags, snake_case, dotted.names, paths, CamelCase, v2; those inside `quoted`
    code) and, with
    words, acronyms (ABC) and capitalised words inside a sentence (Paris, Stripe)."""
    out = []
    for m in _NAME.finditer(text):
        if m.group(0).startswith("`"):
            # A command the model composed from the trajectory's parts (`helm upgrade --dry-run`) is
            # held to its parts: each identifier in it must be the trajectory's, not the whole line.
            out.extend(_names(m.group(0).strip("`"), words=False))
            continue
        word = m.group(0).rstrip(".-")
        if _ABBREVIATION.fullmatch(word):
            continue
        if re.search(r"[_./@\d]|^-|[a-z][A-Z]", word):
            out.append(word)
        elif words and re.fullmatch(r"[A-Z]{2,}s?", word):
            out.append(word.removesuffix("s") if word.endswith("s") else word)
        elif words and len(word) > 1 and word[0].isupper() and not _SENTENCE_START.search(text[:m.start()]):
            out.append(word)
    return out


def ungrounded(memory: str, source: str, *, words: bool = True) -> bool:
    """Holds a number or a name that is not in the source. words=False (lessons, procedures: advice
    names general things, "check the API quota first") holds it to numbers and code identifiers only:
    held to every capitalised word, most of the 1.5B model's lessons were dropped."""
    plain = _plain(source)
    if not _numbers(_ENUMERATOR.sub(" ", _CITATION.sub(" ", memory))) <= _numbers(source):
        return True
    return any(not re.search(rf"(?<![\w-]){re.escape(_plain(name))}(?![\w-])", plain)
               for name in _names(memory, words=words))


def contradicts(kind: Kind, content: str, sources: list[Entry]) -> bool:
    """Whether a clause of the memory says the opposite of the source clause about the same thing
    that speaks with most authority (the user's words first), then shares most words with it.
    Facts are checked against every clause; other kinds against rules and wishes only."""
    theirs: list[tuple[bool, Clause]] = [
        (e.users_words, c) for e in sources for c in clauses(e.text)
        if kind is Kind.FACT or _RULE.search(_plain(c.text))]
    for mine in clauses(content):
        about = [(users, shared, c) for users, c in theirs if (shared := overlap(mine, c))]
        if about and opposite(mine, max(about, key=lambda a: a[:2])[2]):
            return True
    return False
