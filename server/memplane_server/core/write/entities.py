"""Named things a memory mentions (people, places, organisations, products, events, titles), told
without a model from the text's form: capitalised spans, quoted titles, hashtags and handles in
English; dictionary name/place/organisation tags, name and event patterns and 《titles》 in
Chinese. A turn's speaker label ("Caroline: ...", "<Bart>:...") is not an entity of the turn: it
would tie every turn of a speaker to every other. Keys are lowercase, as the entity index holds
them (migration 0017); the graph channel (services/search/graph.py) links memories by them."""
from __future__ import annotations

import re

import jieba.posseg as posseg

MAX_ENTITIES = 32
MAX_LENGTH = 64

# A speaker label: "<Bart>:", "Caroline:", "Dr. Ana Lima:", "李雷："; not "To deploy the API:".
_SPEAKER = re.compile(r"^\s*(?:<[^<>\n]{1,40}>|[A-Z][\w.'\-]*(?: [A-Z][\w.'\-]*){0,2}|[\u4e00-\u9fff]{1,8})\s*[:：]\s*")
_CJK = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]+")
# A capitalised word (or an acronym, or a word with inner capitals: iPhone, McDonald's), with an
# optional possessive; connectors may join two of them ("Museum of Modern Art").
_CAPITALISED = re.compile(r"(?<![\w'’])(?:[A-Z][\w'’\-]*[\w]|[A-Z]|[a-z]+[A-Z][\w'’\-]*)")
_CONNECTORS = frozenset({"of", "de", "la", "&", "du", "van", "von", "da", "del"})
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{2,60})[\"”]|(?<![\w])'([A-Z][^'\n]{1,58}[^\s'])'(?![\w])")
_TAG = re.compile(r"(?<![\w])[#@][A-Za-z][\w.\-]{1,40}")
_WORDS = re.compile(r"[\w'’\-&]+")
# Words written capitalised that name nothing: sentence starters, pronouns, interjections, and
# calendar words (the time channel reads those).
_NOT_NAMES = frozenset("""
i i'm i've i'll i'd me my mine we us our you your he him his she her it its they them their
a an the this that these those there here what when where who whom whose why how which
and or but so if then because as at by for from in into of on to up with without about after before
is are was were be been am do does did have has had will would can could should may might must shall
hey hi hello yeah yes yep yup no nope oh ooh ah aw aww wow whoa hmm haha hahaha lol omg ok okay sure
thanks thank thx congrats congratulations sorry please well great good nice cool awesome amazing
glad happy love lovely definitely absolutely totally really just also too yay woah bye cheers
dear gosh geez ugh alright anyway anyways btw plus still even maybe perhaps not never always
all any some every each both either neither one two three first last next new old
let let's that's it's what's there's here's who's how's where's can't don't doesn't didn't won't
isn't aren't wasn't weren't i'd've you're you've they're we're we've he's she's
monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday tonight
mon tue tues wed thu thur thurs fri sat sun jan feb mar apr jun jul aug sep sept oct nov dec
january february march april may june july august september october november december
mom mum dad mother father grandma grandpa sis bro mr mrs ms dr
""".split())

# Events, gatherings and places of a kind, written lowercase: "pottery class", "pride parade",
# "dance studio"; the word before the head names which one, unless it is a common adjective.
_EVENT_HEADS = (
    "class|classes|workshop|parade|race|marathon|festival|conference|concert|party|meeting|trip|roadtrip|"
    "competition|contest|tournament|fair|program|programme|show|exhibit|exhibition|museum|store|shop|studio|"
    "group|club|team|event|reading|game|match|camp|retreat|ceremony|wedding|gala|fundraiser|course|lesson|"
    "lessons|internship|project|campaign|convention|expo|summit|seminar|webinar|recital|performance|tour|"
    "hike|cruise|vacation|holiday"
)
_EVENT = re.compile(rf"\b([a-z][a-z\-]+(?:\s[a-z][a-z\-]+)?)\s({_EVENT_HEADS})\b")
_NOT_MODIFIERS = frozenset("""
great good amazing awesome big little small huge first last next new old local fun nice cool special
whole recent same other another own best better lovely wonderful fantastic incredible beautiful
such what which this that these those some any every each our my your his her their its the a an
one two three few many several whole entire real big-time annual weekly monthly yearly free short long
quick busy crazy wild super really very so most more much online virtual tiny favorite favourite fave
love loved loving like liked enjoy enjoyed gonna wanna gotta taking take took doing did went go going
currently recently upcoming nearby helpful cute fun-filled
""".split())

# Chinese: dictionary tags for person, place, organisation and other proper names.
_ZH_TAGS = frozenset({"nr", "nrt", "nrfg", "ns", "nt", "nz"})
_ZH_EVENT_SUFFIX = ("节", "晚会", "派对", "比赛", "运动会", "音乐会", "演唱会", "展览", "婚礼", "聚会", "典礼", "大赛", "联欢会")
_ZH_EVENT_WORDS = frozenset({"晚会", "派对", "比赛", "运动会", "音乐会", "演唱会", "展览", "婚礼", "聚会", "典礼", "大赛", "联欢会", "节日"})
_ZH_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
)
_ZH_NAME_PREFIX = frozenset("小老阿")
_ZH_NOT_NAME_CHARS = frozenset("的了在和是我你他她它们就不也很都还又去来说要会有着过吗呢吧啊呀把被给让这那一个上下里")
_ZH_TITLE = re.compile(r"[《「“]([^》」”\n]{1,30})[》」”]")


def _key(text: str) -> str | None:
    key = " ".join(text.replace("’", "'").split()).strip(" .,;:!?-'\"").lower()
    key = key.removesuffix("'s").strip().removeprefix("the ")
    if not key or len(key) > MAX_LENGTH or key in _NOT_NAMES or not any(c.isalnum() for c in key):
        return None
    return key


def _english_spans(sentence: str, sentence_case: bool) -> list[str]:
    """Runs of capitalised words, joined by connectors, in one sentence. In English every sentence
    starts with a capital (sentence_case), so a lone first word ("Taking", "Painting") counts only
    when it is an acronym or starts a longer span ("Door Dash"); a Latin word in Chinese text
    ("Bart在...") is capitalised because it is a name."""
    spans: list[list[str]] = []
    current: list[str] = []
    pending: list[str] = []  # connectors seen since the last capitalised word
    opening = False  # current holds only the sentence's first word
    for position, match in enumerate(_WORDS.finditer(sentence)):
        word = match.group(0)
        if bool(_CAPITALISED.fullmatch(word)) and word.lower().removesuffix("'s") not in _NOT_NAMES:
            opening = sentence_case and position == 0 and not word.isupper()
            current.extend(pending)
            pending = []
            current.append(word)
            if word.endswith(("'s", "’s")):  # "Gina's store": the name ends there
                if not opening:
                    spans.append(current)
                current, opening = [], False
        elif current and word.lower() in _CONNECTORS and not pending and not opening:
            pending.append(word)
        else:
            if current and not opening:
                spans.append(current)
            current, pending, opening = [], [], False
    if current and not opening:
        spans.append(current)
    out = [" ".join(span) for span in spans]
    # "Agreed Caroline": a span that opened the sentence may have an ordinary word in front.
    out += [" ".join(span[1:]) for span in spans if len(span) > 1 and sentence.lstrip().startswith(span[0])]
    return out


def _events(text: str) -> list[str]:
    found = []
    for m in _EVENT.finditer(text.lower()):
        words = [w for w in m.group(1).split() if w not in _NOT_MODIFIERS and w not in _NOT_NAMES]
        if words and words[-1] == m.group(1).split()[-1]:  # the head's own modifier is kept
            found.append(" ".join(words[-1:] + [m.group(2)]))
    return found


def _english(text: str, sentence_case: bool) -> list[str]:
    found = [m.group(1) or m.group(2) for m in _QUOTED.finditer(text)]
    found += _events(text)
    found += [m.group(0)[1:] for m in _TAG.finditer(text)]
    for piece in re.split(r"(?<=[.!?…\n])\s+|[\"“”]", text):
        found += _english_spans(piece, sentence_case)
    return found


def _chinese(chunk: str) -> list[str]:
    found = [m.group(1) for m in _ZH_TITLE.finditer(chunk)]
    # Dictionary tags only (no HMM): ten times faster, and the HMM's guesses at unknown words
    # tagged verb phrases as names ("喝咖啡"); names it would find come back by the pattern below.
    words = [(w.word, w.flag) for w in posseg.cut(chunk, HMM=False)]
    i = 0
    while i < len(words):
        word, flag = words[i]
        nxt = words[i + 1][0] if i + 1 < len(words) else ""
        if (word in _ZH_SURNAMES or word in _ZH_NAME_PREFIX) and len(nxt) == 1 and _CJK.fullmatch(nxt) \
                and nxt not in _ZH_NOT_NAME_CHARS:
            # A surname (or 小/老/阿) left as a single character before another single character
            # is a given name the dictionary does not hold: 张伟, 小明.
            name = word + nxt
            third = words[i + 2][0] if i + 2 < len(words) else ""
            if word in _ZH_SURNAMES and len(third) == 1 and _CJK.fullmatch(third) and third not in _ZH_NOT_NAME_CHARS:
                name += third
                i += 1
            found.append(name)
            i += 2
            continue
        if nxt in _ZH_EVENT_WORDS and flag in ("n", "nr", "ns", "nz", "t", "nt") and len(word) >= 2:
            found.append(word + nxt)  # 圣诞节 + 晚会
            i += 2
            continue
        if len(word) >= 2 and _CJK.fullmatch(word) and (flag in _ZH_TAGS or word.endswith(_ZH_EVENT_SUFFIX)):
            found.append(word)
        i += 1
    return found


def extract_entities(text: str) -> list[str]:
    """The distinct entity keys a text mentions, at most MAX_ENTITIES."""
    text = _SPEAKER.sub("", text, count=1)
    found: list[str] = []
    found += _english(_CJK.sub(". ", text), sentence_case=not _CJK.search(text))
    for chunk in re.findall(r"[\u4e00-\u9fff\u3400-\u4dbf《》「」“”]+", text):
        found += _chinese(chunk)
    keys = (_key(f) for f in found)
    return list(dict.fromkeys(k for k in keys if k))[:MAX_ENTITIES]
