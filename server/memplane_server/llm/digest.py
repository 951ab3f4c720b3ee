"""The session digest prompt: a model, when one is configured (MEMPLANE_SESSION_DIGEST_LLM), writes
what a session was about, so the session channel of Search finds it by what happened there (a
move, a trip) as well as by the words said."""
from __future__ import annotations

from ..core.write.digests import MAX_DIGEST_CHARS
from .chat import ChatModel, MalformedOutput, json_object
from .structured import Expected, obj, string

# The turns shown to the model: a long session is cut to its first turns (and the digest says so).
MAX_PROMPT_CHARS = 12000

SYSTEM_PROMPT = f"""You index conversation sessions for later search.
You get the turns of one session. Return ONLY a JSON object: {{"digest": "..."}}
- The digest says, in at most {MAX_DIGEST_CHARS // 4} characters, what happened in the session: the
  events, plans, changes and decisions, who took part, and the places, things and dates named.
- Use the words a later question would use; no opinions, no advice."""


EXPECTED = Expected("digest", obj({"digest": string(MAX_DIGEST_CHARS // 4)}), max_tokens=512)


def parse_digest(text: str) -> str:
    digest = json_object(text).get("digest")
    if not isinstance(digest, str) or not digest.strip():
        raise MalformedOutput("expected an object with a non-empty digest")
    return digest.strip()[:MAX_DIGEST_CHARS]


def turns_prompt(turns: list[str]) -> str:
    shown: list[str] = []
    used = 0
    for turn in turns:
        if used + len(turn) > MAX_PROMPT_CHARS:
            shown.append(f"(and {len(turns) - len(shown)} more turns)")
            break
        shown.append(turn)
        used += len(turn) + 1
    return "Turns:\n" + "\n".join(shown)


async def write_digest(model: ChatModel, turns: list[str]) -> str:
    return await model.ask_json(SYSTEM_PROMPT, turns_prompt(turns), parse_digest, EXPECTED)
