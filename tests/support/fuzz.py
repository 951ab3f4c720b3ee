"""Schema-driven request fuzzing: requests for every RPC built field by field from the protobuf
descriptors, with valid-looking values (ids that exist, short texts, real time zones) mixed with
edge values (empty, huge, NUL, unknown enums, extreme timestamps and durations, NaN and
infinite floats, deep and huge Structs, long repeated fields) and raw bytes.

Everything comes from one seeded random.Random, so a seed and a request count name the same
requests again (the pool's ids differ per run; which of them is used does not).
"""
from __future__ import annotations

import base64
import json
import math
import random
import string
import uuid
from dataclasses import dataclass, field

from google.protobuf import descriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

F = descriptor.FieldDescriptor

INT_RANGES = {
    F.TYPE_INT32: (-2**31, 2**31 - 1), F.TYPE_SINT32: (-2**31, 2**31 - 1), F.TYPE_SFIXED32: (-2**31, 2**31 - 1),
    F.TYPE_INT64: (-2**63, 2**63 - 1), F.TYPE_SINT64: (-2**63, 2**63 - 1), F.TYPE_SFIXED64: (-2**63, 2**63 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1), F.TYPE_FIXED32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1), F.TYPE_FIXED64: (0, 2**64 - 1),
}
PROTO_MIN_SECONDS, PROTO_MAX_SECONDS = -62135596800, 253402300799  # 0001-01-01 .. 9999-12-31T23:59:59
DAY = 86400
SENTENCES = [
    "The user lives in Shanghai", "Deploys need the VPN on", "how do I deploy to prod?",
    "what is my city?", "did I change my city last week?", "where are we with the migration?",
    "user: hi\nassistant: hello\nuser: where do I live?", "我上周去了北京", "用户的城市是什么", "去年五月发生了什么",
    "what happened 3 days ago?", "in May 2023 we moved", "the week before 9 June 2023", "recently", "最近三天",
    "next year", "tomorrow at noon",
]
TIME_ZONES = ["UTC", "Asia/Shanghai", "America/New_York", "Pacific/Kiritimati", "Etc/GMT+12", "Etc/GMT-14",
              "Europe/London"]
BAD_TIME_ZONES = ["Mars/Olympus", "../../etc/passwd", "/etc/localtime", "Asia/Shanghai\x00", "utc ", "Etc/GMT+99",
                  "x" * 300, "x" * 100_000, ".", "Europe/", "\u00e9"]
NEEDED = {"memories", "kind", "content", "query", "id", "memory", "update_mask", "request", "memory_ids",
          "session_id", "entity", "tenant", "agent", "grant", "domain", "name", "role", "access", "ids",
          "tenant_id", "session", "task", "paths", "challenger_id", "keep"}
SELDOM = {"ttl", "state_key", "infer", "request_id", "page_token", "as_of_time", "valid_to", "layer", "hard",
          "statuses", "scope_weights"}
MEMORY_FIELDS = ["content", "context", "tags", "metadata", "confidence", "status", "value", "valid_from", "valid_to",
                 "user_id", "id", "tenant_id", "scope", "embedding_model", "metadata.k", ""]


def edge_strings(rng: random.Random) -> str:
    """Strings that have broken services before: empty, NUL, huge, odd Unicode, injections."""
    choices = [
        "", " ", "\x00", "a\x00b", "\n\t", "x" * 257, "é" * 129, "x" * 10_000, "\u202eevil", "😀" * 100,
        "'; DROP TABLE memories; --", "%s%n%x", "{{}}\\u0000", "../../etc/passwd", "\uffff\ufffe", "\U0010ffff",
        "null", "NaN", "-infinity", "0001-01-01", "\r\n\r\n", " " * 1000,
        "".join(chr(rng.randrange(1, 0xD7FF)) for _ in range(rng.randrange(1, 40))),
    ]
    if rng.random() < 0.08:  # rare: sizes that only the message limit stops
        choices.append(rng.choice(["x" * 100_000, "y" * 1_000_000]))
    return rng.choice(choices)


SPECIAL_TYPES = {"google.protobuf.Timestamp": "_timestamp", "google.protobuf.Duration": "_duration",
                 "google.protobuf.Struct": "_struct", "google.protobuf.FieldMask": "_field_mask"}
# The edges of a "sharp" request: the ones most likely to pass the other checks and break a layer.
SHARP_STRINGS = ["\x00", "a\x00b", "x" * 257, "é" * 129, "x" * 100_000, ""]
SOME_UUID = "5f0c6b1e-3a52-4d7e-9a0b-8c1d2e3f4a5b"


def page_token(rng: random.Random) -> str:
    """Tokens this server could have issued (base64 JSON lists) with the wrong content, and junk."""
    position = rng.choice([
        ["0001-01-01T00:00:00", SOME_UUID], ["9999-12-31T23:59:59.999999+00:00", SOME_UUID],
        ["2024-01-01T00:00:00+00:00", SOME_UUID], ["2024-01-01", "not-a-uuid"], [1, 2], [None, None],
        [10**30], [-1], [True], [1.5], ["a"], ["\x00"], [{"a": 1}], [[]], [], [2**63], ["x" * 300],
        ["2024-01-01T00:00:00+14:00", SOME_UUID], ["+99999-01-01", "x"],
    ])
    if rng.random() < 0.3:
        return edge_strings(rng) or "%%"
    return base64.urlsafe_b64encode(json.dumps(position).encode()).decode().rstrip("=")


@dataclass
class Pool:
    """Values that exist on the server, so generated requests also get past lookups."""

    tenants: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    domains: list[str] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)
    operation_ids: list[str] = field(default_factory=list)
    key_ids: list[str] = field(default_factory=list)
    challengers: list[str] = field(default_factory=list)  # NEEDS_CONFIRMATION memories, each resolvable once
    sessions: list[str] = field(default_factory=lambda: ["s1", "s2"])
    entities: list[str] = field(default_factory=lambda: ["user", "flight"])
    attributes: list[str] = field(default_factory=lambda: ["city", "time"])


class RequestGenerator:
    """Builds requests from descriptors. Three kinds, drawn per request: valid-looking ones
    (deep paths: lookups, writes, searches), valid-looking ones with exactly one field slot given
    a sharp edge value (so every check is reached with the rest of the request valid; the sharp
    values are the kinds that broke the server before), and hostile ones with wild values
    anywhere."""

    def __init__(self, rng: random.Random, pool: Pool, *, max_depth: int = 4) -> None:
        self.rng = rng
        self.pool = pool
        self.max_depth = max_depth
        self._wild_chance, self._sharp_at, self._leaf, self._sharp = 0.3, -1, 0, False
        self._sharpened: tuple[Message, F] | None = None

    # --- messages ---------------------------------------------------------------------------

    def request(self, method: descriptor.MethodDescriptor) -> Message:
        cls = GetMessageClass(method.input_type)
        for _ in range(5):
            roll = self.rng.random()
            self._wild_chance = 0.3 if roll >= 0.85 else 0.0
            self._sharp_at, self._leaf, self._sharpened = -1, 0, None
            msg = cls()
            self.fill(msg, 0)
            if roll < 0.5:
                self._sharpen_one(msg)
                if self._sharpened is not None:
                    self._make_it_count(msg, *self._sharpened)
            if msg.ByteSize() <= 6 * 1024 * 1024:  # under the server's 16 MB receive limit, with room
                return msg
        return cls()

    def _sharpen_one(self, msg: Message) -> None:
        """Gives one field slot of a valid-looking request, set or not, chosen uniformly, a sharp value."""
        slots = list(self._slots(msg, 0))
        if not slots:
            return
        parent, f = self.rng.choice(slots)
        self._sharpened = (parent, f)
        self._sharp_at, self._leaf = 0, 0  # the next value drawn is the sharp one
        try:
            if f.is_repeated:
                container = getattr(parent, f.name)
                if f.type != F.TYPE_MESSAGE and self.rng.random() < 0.5:
                    container.append(self.scalar(f))  # one bad element in a good list
                else:
                    del container[:]
                    self._repeated(parent, f, 1)  # a bad length
            elif f.type == F.TYPE_MESSAGE:
                sub = getattr(parent, f.name)
                sub.Clear()
                if f.message_type.full_name in SPECIAL_TYPES:
                    self.fill(sub, 1)
                else:  # an unset message: fill it, then sharpen a slot inside
                    self._sharp_at = -1
                    self.fill(sub, 1)
                    self._sharpen_one(sub)
                sub.SetInParent()
            else:
                setattr(parent, f.name, self.scalar(f))
        except (ValueError, TypeError, OverflowError):
            pass
        finally:
            self._sharp_at = -1

    @staticmethod
    def _make_it_count(request: Message, parent: Message, f: F) -> None:
        """Sets what makes the server read the sharpened field: the working layer for ttl and
        state_key, the field's path in an UpdateMemory mask."""
        if f.name in ("ttl", "state_key") and "layer" in parent.DESCRIPTOR.fields_by_name:
            parent.layer = parent.DESCRIPTOR.fields_by_name["layer"].enum_type.values_by_name["LAYER_WORKING"].number
            parent.session_id = parent.session_id or "s2"
        if "update_mask" in request.DESCRIPTOR.fields_by_name and parent.DESCRIPTOR.name == "Memory" \
                and f.name not in request.update_mask.paths:
            request.update_mask.paths.append(f.name)

    def _slots(self, msg: Message, depth: int):
        for f in msg.DESCRIPTOR.fields:
            nested = (f.type == F.TYPE_MESSAGE and f.message_type.full_name not in SPECIAL_TYPES
                      and not f.message_type.GetOptions().map_entry and depth < self.max_depth)
            if nested and f.is_repeated:
                for item in list(getattr(msg, f.name))[:3]:
                    yield from self._slots(item, depth + 1)
            elif nested and msg.HasField(f.name):
                yield from self._slots(getattr(msg, f.name), depth + 1)
                continue
            yield msg, f

    def _edge(self) -> bool:
        """Whether the next value is an edge value; self._sharp tells which kind."""
        self._leaf += 1
        self._sharp = self._leaf - 1 == self._sharp_at
        return self._sharp or self.rng.random() < self._wild_chance

    def _pick(self, sharp: list, wild: list):
        return self.rng.choice(sharp if self._sharp else sharp + wild)

    def fill(self, msg: Message, depth: int) -> None:
        special = SPECIAL_TYPES.get(msg.DESCRIPTOR.full_name)
        if special is not None:
            getattr(self, special)(msg)
            return
        for f in msg.DESCRIPTOR.fields:
            if self.rng.random() > self._presence(f):
                continue
            try:
                if f.is_repeated:
                    self._repeated(msg, f, depth)
                elif f.type == F.TYPE_MESSAGE:
                    if depth < self.max_depth:
                        self.fill(getattr(msg, f.name), depth + 1)
                        getattr(msg, f.name).SetInParent()
                else:
                    setattr(msg, f.name, self.scalar(f))
            except (ValueError, TypeError, OverflowError):
                continue  # a value the Python runtime refuses to hold is not one a client can send

    def _presence(self, f: F) -> float:
        """How likely a field is set: hostile requests set anything; valid-looking ones nearly
        always set what the RPC needs and seldom what only applies elsewhere."""
        if self._wild_chance:
            return 0.65
        if f.name in NEEDED:
            return 0.97
        if f.name in SELDOM:
            return 0.04
        return 0.4

    def _repeated(self, msg: Message, f: F, depth: int) -> None:
        container = getattr(msg, f.name)
        count = self._pick([0, 65, 257, 10_000], [64, 1000]) if self._edge() else self.rng.choice([1, 1, 2, 3])
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            for _ in range(min(count, 100)):
                container[self.text(f)] = self.text(f)
            return
        if f.type == F.TYPE_MESSAGE:
            if depth >= self.max_depth or not count:
                return
            first = container.add()
            self.fill(first, depth + 1)
            # Long lists repeat one element, an empty one when copies of the first would be too big.
            template = first if count <= 10 or first.ByteSize() * count < 2 << 20 else type(first)()
            for _ in range(1, count):
                item = container.add()
                if count > 10:
                    item.CopyFrom(template)
                else:
                    self.fill(item, depth + 1)
            return
        values = [self.scalar(f) for _ in range(min(count, 10))]
        container.extend(values + [values[0]] * (count - len(values)) if values else [])

    # --- scalars ----------------------------------------------------------------------------

    def scalar(self, f: F):
        t = f.type
        if t == F.TYPE_STRING:
            return self.text(f)
        rng = self.rng
        edge = self._edge()
        if t == F.TYPE_BYTES:
            return rng.randbytes(rng.choice([0, 1, 16, 1000] if edge else [8]))
        if t == F.TYPE_BOOL:
            return rng.random() < 0.5
        if t == F.TYPE_ENUM:
            numbers = [v.number for v in f.enum_type.values]
            if edge:
                return self._pick([0, max(numbers) + 1], [99, -1, 2**31 - 1, -2**31])
            if f.name in ("scope", "layer", "mode", "infer", "promote", "state") and not f.is_repeated \
                    and f.containing_type.name != "ScopeWeight" and rng.random() < 0.7:
                return 0  # the server's default is the common case
            return rng.choice([n for n in numbers if n] or numbers)
        if t in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
            if edge:
                return self._pick([math.nan, math.inf, -math.inf, -1.0, 1.5], [-0.0, 1e-45, 1e308, -1e308])
            return rng.choice([0.0, 0.25, 0.5, 0.9, 1.0, rng.random()])
        if edge:
            lo, hi = INT_RANGES[t]
            return self._pick([-1, lo, hi], [501, 10_000, rng.randint(lo, hi)])
        return rng.choice([0, 1, 3, 10, 50])

    def text(self, f: F) -> str:
        rng = self.rng
        name = f.name
        if self._edge():
            if name == "time_zone" and rng.random() < 0.5:
                return rng.choice(BAD_TIME_ZONES)
            return self._pick(SHARP_STRINGS, []) if self._sharp else edge_strings(rng)
        p = self.pool
        hinted = {
            "tenant_id": p.tenants, "agent_id": p.agents, "domain": p.domains, "domains": p.domains,
            "name": p.domains + ["fz-" + self._word()], "session_id": p.sessions, "entity": p.entities,
            "attribute": p.attributes, "paths": MEMORY_FIELDS, "memory_ids": p.memory_ids,
            "memory_id": p.memory_ids, "ids": p.memory_ids, "supersedes": p.memory_ids,
            "challenger_id": p.challengers,
        }.get(name)
        if name == "id":
            parent = f.containing_type.name
            hinted = {"RevokeApiKeyRequest": p.key_ids, "GetTenantRequest": p.tenants, "Tenant": p.tenants,
                      "Agent": p.agents, "GetOperationRequest": p.operation_ids,
                      "CancelOperationRequest": p.operation_ids}.get(parent, p.memory_ids)
        if name == "page_token":
            return page_token(rng) if rng.random() < 0.5 else ""
        if name == "request_id":
            return str(uuid.UUID(int=rng.getrandbits(128)))
        if name == "time_zone":
            return rng.choice(TIME_ZONES)
        if hinted and rng.random() < 0.8:
            return rng.choice(hinted)
        if name in ("query", "content", "context", "request", "feedback", "summary", "value", "action",
                    "observation"):
            return rng.choice(SENTENCES)
        if name.endswith("_id") or name in ("id", "ids", "memory_ids", "tags", "type", "state_key"):
            return rng.choice([str(uuid.UUID(int=rng.getrandbits(128))), self._word(), "s1", "u1", "t1"])
        return self._word()

    def _word(self) -> str:
        return "".join(self.rng.choice(string.ascii_lowercase) for _ in range(self.rng.randrange(1, 12)))

    # --- well-known types -------------------------------------------------------------------

    def _timestamp(self, ts) -> None:
        rng = self.rng
        if self._edge():
            ts.seconds, ts.nanos = self._pick(
                [(PROTO_MIN_SECONDS, 0), (PROTO_MAX_SECONDS, 999_999_999), (PROTO_MIN_SECONDS - 1, 0),
                 (PROTO_MAX_SECONDS + 1, 0), (PROTO_MIN_SECONDS + DAY - 1, 0), (PROTO_MAX_SECONDS - DAY, 0),
                 (0, -1), (0, 1_000_000_000)],
                [(2**63 - 1, 0), (-2**63, 0), (PROTO_MAX_SECONDS, 999_999), (PROTO_MIN_SECONDS + DAY, 0),
                 (rng.randint(PROTO_MIN_SECONDS, PROTO_MAX_SECONDS), rng.randrange(10**9)), (0, 2**31 - 1)],
            )
        else:
            now = 1_750_000_000
            ts.seconds = rng.choice([now, now - 3 * DAY, now - 400 * DAY, now + DAY, 0, 1_600_000_000])
            ts.nanos = rng.choice([0, 0, 500_000_000, rng.randrange(10**9)])

    def _duration(self, d) -> None:
        if self._edge():
            d.seconds, d.nanos = self._pick(
                [(10**12, 0), (31_622_401, 0), (0, 0), (-1, 0), (0, -1), (2**63 - 1, 0)],
                [(-2**63, 0), (315_576_000_001, 0), (0, 1_000_000_000), (1, -1), (0, -2**31), (31_622_400, 1)],
            )
        else:
            d.seconds = self.rng.choice([1, 60, 3600, 86400])

    def _field_mask(self, mask) -> None:
        rng = self.rng
        if self._edge():
            count = self._pick([0, 1000], [1, 2])
            mask.paths.extend(rng.choice(MEMORY_FIELDS + [edge_strings(rng)]) for _ in range(count))
        else:
            mask.paths.extend(rng.sample(MEMORY_FIELDS[:10], rng.choice([1, 1, 2])))

    def _struct(self, st) -> None:
        rng = self.rng
        if not self._edge():
            for _ in range(rng.choice([0, 1, 2, 3])):
                self._value(st.fields[self._key(False)], 0, False)
            return
        shape = self._pick(["nan", "inf", "nul", "deep", "big", "wide"], ["mixed"])
        if shape in ("nan", "inf"):
            st.fields["n"].number_value = math.nan if shape == "nan" else rng.choice([math.inf, -math.inf])
        elif shape == "nul":
            st.fields[rng.choice(["a\x00", "k"])].string_value = rng.choice(["v", "a\x00b"])
        elif shape == "deep":
            node = st
            for _ in range(rng.choice([16, 17, 30])):
                node = node.fields["d"].struct_value
            node.fields["leaf"].number_value = 1
        elif shape == "big":
            st.fields["big"].string_value = "x" * rng.choice([70_000, 1_000_000])
        elif shape == "wide":
            for i in range(rng.choice([5000, 10_000])):
                st.fields[f"k{i}"].number_value = i
        else:
            self._value(st.fields[self._key(True)], 0, True)

    def _key(self, edge: bool) -> str:
        return self.rng.choice(["", "a\x00", "x" * 300, "ü"] if edge else ["k", "note", self._word()])

    def _value(self, v, depth: int, edge: bool) -> None:
        rng = self.rng
        kind = rng.choice(["number", "string", "bool", "null", "struct", "list"] if depth < 3 else ["number", "string"])
        if kind == "number":
            v.number_value = rng.choice([1e308, -1e308, 5e-324, math.nan, math.inf, -math.inf, 2.0**53 + 1]
                                        if edge else [0.0, 1.0, -2.5, 42.0])
        elif kind == "string":
            v.string_value = edge_strings(rng) if edge else rng.choice(["v", "", "é"])
        elif kind == "bool":
            v.bool_value = rng.random() < 0.5
        elif kind == "null":
            v.null_value = 0
        elif kind == "struct":
            for _ in range(rng.choice([0, 1, 2])):
                self._value(v.struct_value.fields[self._key(edge)], depth + 1, edge)
            v.struct_value.SetInParent()
        else:
            for _ in range(rng.choice([0, 1, 3])):
                self._value(v.list_value.values.add(), depth + 1, edge)
            v.list_value.SetInParent()

    # --- raw bytes ----------------------------------------------------------------------------

    def raw(self, method: descriptor.MethodDescriptor) -> bytes:
        """Bytes that may not parse: random, a real request mutated, or a string field holding invalid UTF-8."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.25:
            return rng.randbytes(rng.randrange(0, 64))
        if roll < 0.5:
            strings = [f for f in method.input_type.fields if f.type == F.TYPE_STRING]
            if strings:
                f = rng.choice(strings)
                payload = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"ok\x80"])
                return bytes([f.number << 3 | 2, len(payload)]) + payload
        data = bytearray(self.request(method).SerializeToString())
        for _ in range(rng.randrange(1, 4)):
            op = rng.random()
            if op < 0.4 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif op < 0.7 and data:
                del data[rng.randrange(len(data)):]
            else:
                data += rng.randbytes(rng.randrange(1, 8))
        return bytes(data)


def describe(msg: Message, limit: int = 80) -> str:
    """A request in text format with long strings cut, for failure reports."""
    copy = type(msg)()
    copy.CopyFrom(msg)
    _shorten(copy, limit)
    text = str(copy)
    return text if len(text) < 4000 else text[:4000] + f"... ({len(text)} chars)"


def _shorten(msg: Message, limit: int) -> None:
    for f, value in msg.ListFields():
        if f.type == F.TYPE_STRING:
            if f.is_repeated:
                if f.message_type is None:
                    cut = [v if len(v) <= limit else f"{v[:limit]}...({len(v)} chars)" for v in value]
                    del value[:]
                    value.extend(cut)
            elif len(value) > limit:
                setattr(msg, f.name, f"{value[:limit]}...({len(value)} chars)")
        elif f.type == F.TYPE_MESSAGE:
            if f.message_type.GetOptions().map_entry:
                continue
            for item in (value if f.is_repeated else [value]):
                _shorten(item, limit)


def field_slots(message: descriptor.Descriptor, depth: int = 0) -> int:
    """How many field slots a request type has, nested messages included: the share of the
    requests its RPC gets, so a Write (dozens of fields) is tried more than a GetTenant (one)."""
    count = 0
    for f in message.fields:
        count += 1
        if (f.type == F.TYPE_MESSAGE and f.message_type.full_name not in SPECIAL_TYPES
                and not f.message_type.GetOptions().map_entry and depth < 3):
            count += field_slots(f.message_type, depth + 1)
    return count
