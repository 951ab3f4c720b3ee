"""The synthetic corpus of the scale benchmarks (search_scale.py, forget.py, shared_scan.py): memories
in write order, ~70% LoCoMo turns in sessions of ~20, ~20% facts (mostly entity/attribute/value facts
of 1,200 made-up people and of "user", some superseding older values, the rest plain made-up
statements), ~10% events (LoCoMo turns, dates spread over 2022-2024); and the queries over it: LoCoMo
questions, ~20% fact questions and ~10% questions naming a time, so that every channel runs."""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from bulk import SEED
from foundation import memory_texts
from search_tenants import tenant_name, tenant_sizes

START = datetime(2022, 1, 1, tzinfo=timezone.utc)
SPAN = datetime(2025, 1, 1, tzinfo=timezone.utc) - START

FIRST = ["Maria", "Tom", "Aiko", "Lucas", "Priya", "Omar", "Sofia", "Jonas", "Mei", "Daniel", "Amara", "Felix",
         "Ines", "Kofi", "Elena", "Raj", "Hana", "Mateo", "Zoe", "Ivan", "Leila", "Noah", "Yuki", "Carmen",
         "Samuel", "Nadia", "Oscar", "Lin", "Grace", "Tariq"]
LAST = ["Lopez", "Becker", "Tanaka", "Silva", "Sharma", "Haddad", "Rossi", "Berg", "Chen", "Novak", "Okafor",
        "Weber", "Garcia", "Mensah", "Petrova", "Iyer", "Kim", "Alvarez", "Dubois", "Ivanov", "Nakamura", "Costa",
        "Fischer", "Nguyen", "Kowalski", "Adeyemi", "Moreau", "Larsen", "Santos", "Yilmaz", "Park", "Murphy",
        "Eriksson", "Romano", "Castillo", "Horvat", "Banerjee", "Ali", "Schmidt", "Takahashi"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
CITIES = ["Lisbon", "Osaka", "Nairobi", "Toronto", "Berlin", "Austin", "Seville", "Krakow", "Melbourne", "Bogota",
          "Oslo", "Hanoi", "Dublin", "Porto", "Denver", "Lyon", "Accra", "Taipei", "Valencia", "Edinburgh"]
FOODS = ["ramen", "paella", "jollof rice", "pierogi", "pad thai", "lasagna", "tacos al pastor", "sushi", "falafel",
         "butter chicken", "moussaka", "pho", "goulash", "ceviche", "dim sum", "shakshuka"]
EMPLOYERS = ["Northwind Labs", "Bluefin Analytics", "Helios Energy", "Cedar Health", "Orbital Freight",
             "Maple & Co", "Quartz Media", "Riverbank Credit Union", "Tessellate Games", "Juniper Schools",
             "Arcadia Robotics", "Saltmarsh Brewing"]
JOBS = ["nurse", "data engineer", "architect", "primary school teacher", "pastry chef", "paramedic", "UX designer",
        "accountant", "marine biologist", "bus driver", "product manager", "carpenter", "translator", "pharmacist"]
PETS = ["a beagle called Pepper", "two cats, Miso and Tofu", "a parrot named Kiwi", "a golden retriever called Max",
        "a rabbit named Clover", "a tortoise called Sheldon", "a greyhound named Luna", "no pets"]
HOBBIES = ["rock climbing", "pottery", "birdwatching", "salsa dancing", "chess", "trail running", "woodworking",
           "knitting", "photography", "sailing", "baking sourdough", "playing the cello"]
COLORS = ["teal", "mustard yellow", "forest green", "burgundy", "navy blue", "lavender", "coral", "charcoal grey"]
CARS = ["a 2015 Honda Civic", "a Tesla Model 3", "a red Vespa", "no car", "a Volvo estate", "a Toyota Prius",
        "a Ford Ranger pickup", "a Mini Cooper"]
ALLERGIES = ["peanuts", "shellfish", "pollen", "cats", "penicillin", "gluten", "dust mites", "nothing"]
LANGUAGES = ["Portuguese", "Japanese", "Swahili", "French", "Hindi", "Arabic", "Italian", "Norwegian", "Mandarin",
             "Czech", "Twi", "German", "Spanish", "Russian", "Korean"]
ATTRIBUTES = {  # attribute -> (sentence, how a question names it)
    "city": ("{e} lives in {v}.", "city"),
    "email": ("{p} email address is {v}.", "email"),
    "favorite_food": ("{p} favourite food is {v}.", "favorite food"),
    "employer": ("{e} works at {v}.", "employer"),
    "job_title": ("{e} works as a {v}.", "job"),
    "phone_number": ("{p} phone number is {v}.", "phone number"),
    "pet": ("{e} has {v}.", "pet"),
    "hobby": ("{p} main hobby is {v}.", "hobby"),
    "favorite_color": ("{p} favourite colour is {v}.", "favorite color"),
    "car": ("{e} drives {v}.", "car"),
    "allergy": ("{e} is allergic to {v}.", "allergy"),
    "language": ("{e} is learning {v}.", "language"),
    "birthday": ("{p} birthday is on {v}.", "birthday"),
}
ACTIVITIES = ["ran a half marathon", "started learning the cello", "moved into a flat with a garden",
              "adopted a rescue dog", "finished a course on machine learning", "broke a wrist skiing",
              "planted tomatoes on the balcony", "joined a book club", "switched to a night shift",
              "renovated the kitchen", "went on a silent retreat", "started volunteering at a food bank",
              "bought an electric bike", "quit drinking coffee", "took up beekeeping",
              "visited grandparents in the village",
              "gave a talk at a local meetup", "sold an old piano", "learned to bake croissants",
              "got a promotion to team lead", "hiked the coastal trail", "started therapy",
              "signed up for swimming lessons", "lost a passport at the airport", "painted a mural for a cafe",
              "built a treehouse for the kids", "won a pub quiz", "started a podcast about local history",
              "organised a neighbourhood clean-up", "repaired a vintage motorbike"]
WHEN = ["last spring", "in the winter of 2022", "over the summer of 2023", "two years ago", "in early 2024",
        "after the move", "during a long weekend", "on a whim", "with a friend from work", "for the first time"]


def people() -> list[str]:
    return [f"{first} {last}" for first in FIRST for last in LAST]  # 1,200 names


def fact_value(rng: random.Random, person: str, attribute: str, version: int) -> str:
    handle = person.lower().replace(" ", ".") if person != "user" else "me"
    choices = {
        "city": CITIES, "favorite_food": FOODS, "employer": EMPLOYERS, "job_title": JOBS, "pet": PETS,
        "hobby": HOBBIES, "favorite_color": COLORS, "car": CARS, "allergy": ALLERGIES, "language": LANGUAGES,
    }
    if attribute == "email":
        return f"{handle}{version or ''}@{rng.choice(['example.org', 'mail.test', 'inbox.example'])}"
    if attribute == "phone_number":
        return f"+{rng.randint(1, 99)} {rng.randint(100, 999)} {rng.randint(1000, 9999)} {rng.randint(100, 999)}"
    if attribute == "birthday":
        return f"{rng.randint(1, 28)} {rng.choice(MONTHS)}"
    return rng.choice(choices[attribute])


def build_memories(turns: list[tuple[str, str]], n: int, *, seed: int = SEED, text_start: int = 0) -> list[dict]:
    """n memory dicts in write order: ~70% turns in sessions, ~20% facts, ~10% events; turns and
    events take the texts numbered from text_start on."""
    rng = random.Random(seed)
    kinds = rng.choices(["turn", "fact", "event"], weights=[70, 20, 10], k=n)
    texts = iter(memory_texts(turns, sum(k != "fact" for k in kinds), text_start))
    names = people()
    pairs = [(person, attribute) for person in names for attribute in ATTRIBUTES]
    rng.shuffle(pairs)
    user_pairs = [("user", attribute) for attribute in ATTRIBUTES]
    pairs += user_pairs  # taken from the end: the user's facts come first
    current: dict[tuple[str, str], tuple[int, str]] = {}  # (entity, attribute) -> (version, value)
    said: set[str] = set()  # a text written again would be re-observed, not stored as one more memory
    items: list[dict] = []
    session, left, turn_no, session_start = 0, 0, 0, START
    for i, kind in enumerate(kinds):
        at = START + SPAN * (i / n)  # occurred_at follows write order, so newer facts replace older ones
        if kind == "turn":
            if left == 0:
                session, left, turn_no, session_start = session + 1, rng.randint(15, 25), 0, at
            items.append({"kind": "turn", "content": next(texts), "session_id": f"session-{session:05d}",
                          "occurred_at": session_start + timedelta(seconds=30 * turn_no)})
            turn_no, left = turn_no + 1, left - 1
        elif kind == "event":
            items.append({"kind": "event", "content": next(texts), "occurred_at": START + SPAN * rng.random()})
        elif rng.random() < 0.75:  # structured fact: entity/attribute/value
            # Mostly a new (entity, attribute); about 15% a new value of one already known (1 in 20
            # of them the user's), which supersedes it, so "what was X in 2023?" has history to find.
            if pairs and (rng.random() >= 0.15 or not current):
                person, attribute = pairs.pop()
            else:
                known = [pair for pair in user_pairs if pair in current]
                person, attribute = rng.choice(known) if known and rng.random() < 0.05 else rng.choice(list(current))
            version, before = current.get((person, attribute), (-1, None))
            value = fact_value(rng, person, attribute, version + 1)
            while value == before:  # a new value, so that it supersedes the old one
                value = fact_value(rng, person, attribute, version + 1)
            current[(person, attribute)] = (version + 1, value)
            sentence = ATTRIBUTES[attribute][0]
            e, p = ("The user", "The user's") if person == "user" else (person, f"{person}'s")
            items.append({"kind": "fact", "content": sentence.format(e=e, p=p, v=value), "entity": person,
                          "attribute": attribute, "value": value, "occurred_at": at})
        else:  # plain fact, no entity
            content = f"{rng.choice(names)} {rng.choice(ACTIVITIES)} {rng.choice(WHEN)}."
            while content in said:
                content = f"{rng.choice(names)} {rng.choice(ACTIVITIES)} {rng.choice(WHEN)}."
            said.add(content)
            items.append({"kind": "fact", "occurred_at": at, "content": content})
    return items


def build_spread(turns: list[tuple[str, str]], n: int, tenants: int) -> tuple[list[dict], list[int]]:
    """n memories over the tenants (sizes: search_tenants.tenant_sizes), each tenant's built as one
    tenant's are (its own sessions, facts and times over the whole span), with texts no other
    tenant has; each item names its tenant."""
    sizes, items, text_start = tenant_sizes(n, tenants), [], 0
    for k, size in enumerate(sizes):
        mine = build_memories(turns, size, seed=SEED + k, text_start=text_start)
        text_start += sum(it["kind"] != "fact" for it in mine)
        items += [dict(it, tenant=tenant_name(k)) for it in mine]
    return items, sizes


def build_queries(questions: list[str], n: int) -> list[tuple[str, str]]:
    """n (type, text): LoCoMo questions; 2 in 10 ask for a fact and 1 in 10 names a time."""
    rng = random.Random(SEED + 1)
    names = people()

    def fact_question() -> str:
        attribute = rng.choice(list(ATTRIBUTES))
        said = ATTRIBUTES[attribute][1]
        person, year, month = rng.choice(names), rng.choice([2022, 2023, 2024]), rng.choice(MONTHS)
        return rng.choice([
            f"What is my {said}?", f"What was my {said} in {year}?", f"What is {person}'s {said}?",
            f"What was {person}'s {said} in {month} {year}?", f"Where does {person} live?",
            f"Where did {person} work in {year}?", f"Did {person} change their {said}?",
        ])

    def time_question() -> str:
        year, m = rng.choice([2022, 2023, 2024]), rng.randrange(12)
        return rng.choice([
            f"What happened in {MONTHS[m]} {year}?", "上个月发生了什么", f"{year}年{m + 1}月发生了什么？",
            f"What did we talk about in {MONTHS[m]} {year}?", "What happened last week?",
            f"Which events took place in {year}?", "去年发生了什么",
            f"What did I do on {rng.randint(1, 28)} {MONTHS[m]} {year}?",
        ])

    out, next_locomo = [], 0
    for i in range(n):
        if i % 10 in (2, 6):
            out.append(("fact", fact_question()))
        elif i == 8:  # in the warm-up: the server segments its first Chinese text only then (~0.5 s)
            out.append(("time", "上个月发生了什么"))
        elif i % 10 == 8:
            out.append(("time", time_question()))
        else:
            out.append(("locomo", questions[next_locomo % len(questions)]))
            next_locomo += 1
    return out
