#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Each seed is a small, valid or deliberately broken input in the layout its
target reads (see the comment at the top of each fuzz/<target>_fuzzer.cc).
Protobuf messages are encoded by hand below (no generated code needed), so
the script runs with nothing but Python 3:

    python3 fuzz/make_seeds.py          # rewrites the generated seeds

Seeds whose name starts with "regression-" are inputs that once found a
bug; they are not generated here and the script leaves them alone.
"""

import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")

# --- protobuf wire format ----------------------------------------------------


def varint(n):
    n &= (1 << 64) - 1  # negative int64 values are ten-byte varints
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def u(num, n):
    """A varint field (int32/64, uint32/64, bool, enum)."""
    return varint(num << 3) + varint(n)


def b(num, data):
    """A length-delimited field (string, bytes, message)."""
    if isinstance(data, str):
        data = data.encode()
    return varint((num << 3) | 2) + varint(len(data)) + data


def f64(num, n):
    """A fixed64 field."""
    return varint((num << 3) | 1) + struct.pack("<Q", n & ((1 << 64) - 1))


def msg(*fields):
    return b"".join(fields)


# --- granary.v1 gateway protocol -----------------------------------------------


def request(id=0, method="", key="", payload=b"", timeout_us=0, hops=0,
            chain_id=0, caller="", stream_window=0, traceparent="",
            trace=b""):
    fields = []
    if id:
        fields.append(u(1, id))
    if method:
        fields.append(b(2, method))
    if key:
        fields.append(b(3, key))
    if payload:
        fields.append(b(4, payload))
    if timeout_us:
        fields.append(u(5, timeout_us))
    if hops:
        fields.append(u(6, hops))
    if chain_id:
        fields.append(u(7, chain_id))
    if caller:
        fields.append(b(8, caller))
    if traceparent:
        fields.append(b(10, traceparent))
    if stream_window:
        fields.append(u(12, stream_window))
    if trace:
        fields.append(b(13, trace))
    return msg(*fields)


def binary_trace(trace_hi, trace_lo, span, flags=1):
    """Request.trace: trace id and parent span id big-endian, then flags."""
    return struct.pack(">QQQB", trace_hi, trace_lo, span, flags)


def batch(*requests, cancels=(), credits=()):
    fields = [b(1, r) for r in requests]
    fields += [u(2, c) for c in cancels]
    fields += [b(3, msg(u(1, id), u(2, n))) for id, n in credits]
    return msg(*fields)


COUNTER = "/granary.examples.Counter/"
PING = "/granary.examples.Ping/"
BANK = "/granary.examples.BankAccount/"
ALARM = "/granary.examples.Alarm/"
CHAT = "/granary.examples.Chat/"


def add_request(amount):
    return u(1, amount)


def ping_request(message):
    return b(1, message)


def amount(n):
    return u(1, n)


def transfer(to, n):
    return msg(b(1, to), u(2, n))


def set_alarm(name, due_ms, period_ms):
    return msg(b(1, name), u(2, due_ms), u(3, period_ms))


def reminder_tick(name, period_us):
    return msg(b(1, name), u(2, 1700000000000000), u(3, period_us),
               u(4, 1700000000000000))


def gateway_batch_seeds():
    add = batch(request(1, COUNTER + "Add", "alice", add_request(5)))
    yield "counter-add", add
    yield "mixed", batch(
        request(2, COUNTER + "Get", "alice"),
        request(3, PING + "Ping", "p", ping_request("hi")),
        request(0, COUNTER + "Bump", "alice", add_request(1)),
        request(4, BANK + "Deposit", "acct", amount(10)),
        request(5, ALARM + "Get", "kitchen"))
    yield "refused", batch(
        request(6, "/granary.examples.Nope/Add", "k"),
        request(7, COUNTER + "Add", ""),
        request(8, COUNTER + "Add", "k", b"\x08"),
        request(9, COUNTER + "Add", "k" * 4097),
        request(0, COUNTER + "Nope", "k"))
    yield "truncated", add[:-3]
    yield "empty", b""
    yield "silo-fields", batch(
        request(10, COUNTER + "Add", "bob", add_request(2), timeout_us=1,
                hops=1, chain_id=7, caller="CN=peer"),
        request(11, PING + "Ping", "p", ping_request("x"),
                timeout_us=1 << 63))
    # The trace in binary (what Granary's clients send), in text (what other
    # clients may send), both (binary wins), and malformed binary forms
    # (wrong length, zero ids), which restart the trace.
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    good = binary_trace(0x4bf92f3577b34da6, 0xa3ce929d0e0e4736,
                        0x00f067aa0ba902b7)
    yield "trace", batch(
        request(27, PING + "Ping", "t", ping_request("b"), trace=good),
        request(28, PING + "Ping", "t", ping_request("t"),
                traceparent=traceparent),
        request(29, PING + "Ping", "t", ping_request("bt"), trace=good,
                traceparent="00-zz"),
        request(0, COUNTER + "Bump", "t", add_request(1), trace=good),
        request(30, PING + "Ping", "t", ping_request("24"), trace=good[:24],
                traceparent=traceparent),
        request(31, PING + "Ping", "t", ping_request("26"), trace=good + b"\0"),
        request(32, PING + "Ping", "t", ping_request("0"),
                trace=binary_trace(0, 0, 1)),
        request(33, PING + "Ping", "t", ping_request("0s"),
                trace=binary_trace(0, 1, 0, 0xff)))
    yield "reminder-tick", batch(
        request(12, ALARM + "$Reminder", "kitchen",
                reminder_tick("tea", 1000000)),
        request(13, ALARM + "$Reminder", "kitchen", reminder_tick("", 0)))
    yield "bank", batch(
        request(14, BANK + "Deposit", "a", amount(100)),
        request(15, BANK + "Transfer", "a", transfer("b", 30)),
        request(16, BANK + "Withdraw", "a", amount(1000)),
        request(17, BANK + "Transfer", "a", transfer("a", 1)),
        request(18, BANK + "GetBalance", "b"))
    yield "alarm", batch(
        request(19, ALARM + "Set", "kitchen", set_alarm("tea", 100, 3600000)),
        request(20, ALARM + "Cancel", "kitchen", b(1, "none")),
        request(21, ALARM + "Set", "kitchen", set_alarm("bad", -1, 1)))
    yield "oversized-payload", batch(
        request(22, PING + "Ping", "p", ping_request("x" * 8192)))
    yield "duplicate-ids", batch(
        request(23, COUNTER + "Get", "c"), request(23, COUNTER + "Get", "c"),
        request(23, "/x/y", "c"))
    yield "cancels", batch(request(1, COUNTER + "Add", "alice", add_request(5)),
                           cancels=(1, 99))
    # Server push: a watch with a window, credit for it and for an unknown
    # id, a watch without an id (refused), a post, and a cancel of the watch.
    yield "stream", batch(
        request(24, CHAT + "Post", "room", msg(b(1, "ann"), b(2, "hi"))),
        request(25, CHAT + "Watch", "room", b"", stream_window=2),
        request(0, CHAT + "Watch", "room", b""),
        request(26, CHAT + "Watch", "room", u(1, 1), stream_window=1 << 31),
        credits=((25, 3), (77, 1), (26, 1 << 32 - 1)), cancels=(26,))


# --- gRPC bridge -----------------------------------------------------------------

# The fuzzer indexes types by name and methods in proto order.
ALARM_T, BANK_T, CHAT_T, COUNTER_T, PING_T = 0, 1, 2, 3, 4


def bridge(type_index, method, key, payload, key_present=True, deadline=0,
           deadline_ms=0, slices=1):
    flags = (1 if key_present else 0) | (deadline << 1) | ((slices - 1) << 3)
    key = key.encode() if isinstance(key, str) else key
    out = bytes([type_index, method, flags]) + struct.pack("<H", len(key))
    out += key
    if deadline == 1:
        out += bytes([deadline_ms])
    elif deadline >= 2:
        out += struct.pack("<H", deadline_ms)
    return out + payload


def grpc_bridge_seeds():
    yield "counter-add", bridge(COUNTER_T, 0, "alice", add_request(5))
    yield "counter-bump-one-way", bridge(COUNTER_T, 2, "alice", add_request(1))
    yield "ping-slices-deadline", bridge(PING_T, 0, "p", ping_request("hello"),
                                         deadline=2, deadline_ms=1000,
                                         slices=3)
    yield "missing-key", bridge(COUNTER_T, 1, "", b"", key_present=False)
    yield "deadline-passed", bridge(PING_T, 0, "p", b"", deadline=1,
                                    deadline_ms=5)
    yield "truncated-payload", bridge(BANK_T, 0, "acct", b"\x08")
    yield "key-too-long", bridge(COUNTER_T, 0, "k" * 4097, b"")
    yield "alarm-set", bridge(ALARM_T, 0, "kitchen",
                              set_alarm("tea", 10, 3600000))
    yield "bank-transfer", bridge(BANK_T, 3, "a", transfer("b", 1))
    yield "chat-watch", bridge(CHAT_T, 1, "room", u(1, 0))


# --- directory -----------------------------------------------------------------

SELF = "10.0.0.1:1000@1"
OTHER = "10.0.0.2:1000@1"
TYPE = "granary.examples.Counter"


def entry(key, silo=SELF, type=TYPE, activation=1):
    return msg(b(1, type), b(2, key), b(3, silo), u(4, activation))


def dir_request(e, view_version=0, replace=None):
    fields = [b(1, e)]
    if view_version:
        fields.append(u(2, view_version))
    if replace is not None:
        fields.append(b(3, replace))
    return msg(*fields)


def op(code, payload):
    return bytes([code]) + struct.pack("<H", len(payload)) + payload


REGISTER, LOOKUP, UNREGISTER, REBUILD, VIEW, CLOCK = range(6)


def member(address, generation=1, status=2, types=(TYPE,), suspicions=(),
           gateway="", heartbeat=0, pad=0, copies=0):
    """pad and copies: the fuzzer pads the row with `pad` grain types and
    writes it `copies` times (negative activations and start_unix_ms)."""
    fields = [b(1, address), u(2, generation), u(3, status)]
    if gateway:
        fields.append(b(4, gateway))
    for by, at in suspicions:
        fields.append(b(6, msg(b(1, by), u(2, at))))
    if heartbeat:
        fields.append(u(7, heartbeat))
    if pad:
        fields.append(u(8, -pad))
    if copies:
        fields.append(u(9, -copies))
    fields += [b(10, t) for t in types]
    return msg(*fields)


def view(version, *members):
    return msg(u(1, version), *(b(2, m) for m in members))


def directory_seeds():
    keys = ["alice", "bob", "carol", "dave", "erin", "frank"]
    ops = b""
    for k in keys:
        ops += op(REGISTER, dir_request(entry(k), view_version=1))
        ops += op(LOOKUP, dir_request(entry(k)))
    ops += op(UNREGISTER, dir_request(entry("alice")))
    yield "register-lookup-unregister", ops
    yield "replace", (
        op(REGISTER, dir_request(entry("bob", activation=1))) +
        op(REGISTER, dir_request(entry("bob", activation=2),
                                 replace=entry("bob", activation=1))))
    yield "rebuild", op(REBUILD, msg(
        f64(1, 0), b(2, OTHER),
        *(b(3, entry(k, silo=OTHER)) for k in keys)))
    yield "view-change-and-grace", (
        op(REGISTER, dir_request(entry("carol", silo=OTHER))) +
        op(VIEW, view(2, member("10.0.0.1:1000"),
                      member("10.0.0.2:1000", status=4),
                      member("10.0.0.5:1000"))) +
        op(LOOKUP, dir_request(entry("carol"))) +
        op(CLOCK, bytes([40])) +
        op(LOOKUP, dir_request(entry("carol"))))
    yield "refused", (
        op(REGISTER, dir_request(entry("x", type="granary.examples.Nope"))) +
        op(REGISTER, dir_request(entry("x", type=""))) +
        op(REGISTER, dir_request(entry("x"), view_version=9)) +
        op(REGISTER, dir_request(entry("x", silo="10.0.0.3:1000@1"))) +
        op(LOOKUP, dir_request(entry(""))))


# --- membership ------------------------------------------------------------------

JOINING, ACTIVE, SHUTTING_DOWN, DEAD = 1, 2, 3, 4


def membership_seeds():
    a, b_ = "10.0.0.1:11111", "10.0.0.2:11111"
    yield "lifecycle", view(
        0, member(a, status=JOINING, gateway="10.0.0.1:30000"),
        member(a, status=ACTIVE, gateway="10.0.0.1:30000", heartbeat=5),
        member(b_, status=JOINING), member(b_, status=ACTIVE),
        member(a, status=SHUTTING_DOWN), member(a, status=DEAD))
    yield "invalid-rows", view(
        0, member("no-port", status=JOINING),
        member(a, generation=0, status=JOINING),
        member(a, status=0), member(a, status=9),
        member(a, status=ACTIVE), member(a, status=JOINING),
        member(a, types=("",)))
    yield "suspicions", view(
        0, member(a, status=JOINING), member(b_, status=JOINING),
        member(b_, status=ACTIVE),
        member(b_, status=ACTIVE, suspicions=[(a + "@1", 1000)]),
        member(b_, status=DEAD,
               suspicions=[(a + "@1", 1000), ("10.0.0.9:1@1", 2000)]))
    yield "expected-version", view(3, member(a, status=JOINING))
    # The fuzzer's table judges votes at this time (kNowMs).
    now = 1700000000000
    c = "10.0.0.3:11111"
    yield "votes", view(
        0, *(member(x, status=st, heartbeat=now)
             for x in (a, b_, c) for st in (JOINING, ACTIVE)),
        member(c, status=DEAD, heartbeat=now, suspicions=[(a + "@1", now)]),
        member(c, status=ACTIVE, heartbeat=now,
               suspicions=[(a + "@1", now + 60000)]),
        member(c, status=ACTIVE, heartbeat=now, suspicions=[(a + "@1", now)]),
        member(c, status=ACTIVE, heartbeat=now, suspicions=[]),
        member(c, status=DEAD, heartbeat=now,
               suspicions=[(a + "@1", now), (b_ + "@1", now)]))
    yield "row-flood", view(
        0, member(a, status=JOINING, copies=130),
        member("10.0.0.4:1", status=JOINING, pad=250, copies=34),
        member("10.0.0.5:1", status=JOINING, pad=1100))
    yield "ipv6-and-types", view(
        0, member("[::1]:11111", status=JOINING,
                  types=tuple("t%d" % i for i in range(40))),
        member("[::1]:11111", status=ACTIVE, types=("x" * 257,)))


# --- storage records -----------------------------------------------------------


def reminder_key(type, key, name):
    return (type.encode() + b"\0" + struct.pack(">I", len(key)) + key.encode()
            + name.encode())


def reminder_value(start_us, period_us, fmt=1):
    return bytes([fmt]) + struct.pack("<qq", start_us, period_us)


def reminder(key, value):
    return b"\x01" + struct.pack("<H", len(key)) + key + value


def storage_record_seeds():
    yield "state-account", b"\x00" + struct.pack("<Q", 7) + u(1, 100)
    yield "state-alarms", b"\x00" + struct.pack("<Q", 1 << 40) + b(
        1, msg(b(1, "tea"), b(2, msg(u(1, 3), u(2, 1700000000000)))))
    yield "state-truncated", b"\x00\x01\x02\x03"
    yield "state-empty", b"\x00" + struct.pack("<Q", 0)
    yield "reminder", reminder(
        reminder_key("granary.examples.Alarm", "kitchen", "tea"),
        reminder_value(1700000000000000, 3600000000))
    yield "reminder-no-nul", reminder(b"granary.examples.Alarm",
                                      reminder_value(0, 1))
    yield "reminder-key-truncated", reminder(
        b"granary.examples.Alarm\0\0\0\0\x64kit", reminder_value(0, 1))
    yield "reminder-bad-value", reminder(
        reminder_key("granary.examples.Alarm", "k", "n"),
        reminder_value(-1, -(1 << 63), fmt=2))


# --- CLI JSON --------------------------------------------------------------------

# The message types of the fuzzer's pool, sorted by full name as it sorts
# them (all top-level; none of these protos nests messages).
PROTOS = ["examples/counter.proto", "examples/ping.proto",
          "examples/bank.proto", "examples/alarm.proto",
          "proto/granary/v1/gateway.proto", "proto/granary/v1/cluster.proto"]


def cli_types():
    names = []
    for path in PROTOS:
        with open(os.path.join(ROOT, path)) as f:
            text = f.read()
        package = re.search(r"^package ([\w.]+);", text, re.M).group(1)
        names += [package + "." + m
                  for m in re.findall(r"^message (\w+)", text, re.M)]
    return sorted(names)


def cli_json_seeds():
    types = cli_types()

    def json_seed(type, text, reply=False):
        return bytes([1 if reply else 0, types.index(type)]) + text.encode()

    yield "add", json_seed("granary.examples.AddRequest", '{"amount": 5}')
    yield "add-string-int", json_seed("granary.examples.AddRequest",
                                      '{"amount": "-9223372036854775808"}')
    yield "set-alarm", json_seed(
        "granary.examples.SetAlarmRequest",
        '{"name":"tea","dueMs":1000,"period_ms":"5000"}')
    yield "transfer", json_seed("granary.examples.TransferRequest",
                                '{"to": "b\\u00e9", "amount": 1}')
    yield "alarm-record-map", json_seed(
        "granary.examples.AlarmRecord",
        '{"ticks": {"tea": {"ticks": 3, "lastTickUnixMs": "17"}}}')
    yield "member-enum", json_seed(
        "granary.v1.Member",
        '{"address":"a:1","status":"MEMBER_ACTIVE","suspicions":'
        '[{"by":"b:2@1","atUnixMs":"5"}],"grainTypes":["t"]}')
    yield "request-bytes", json_seed(
        "granary.v1.Request", '{"id":"1","method":"L2dyYW5hcnk=","key":"YQ=="}')
    yield "bad-json", json_seed("granary.examples.AddRequest",
                                '{"amount": 5,,}')
    yield "unknown-field", json_seed("granary.examples.PingRequest",
                                     '{"nope": 1}')
    yield "reply-counter", json_seed("granary.examples.CounterValue", "",
                                     reply=True) + u(1, 42)
    yield "reply-alarm-state", json_seed(
        "granary.examples.AlarmState", "", reply=True) + msg(
        b(1, msg(b(1, "tea"), u(2, 5000), u(4, 2))), b(2, "silo"), u(3, 9))
    yield "reply-unknown-fields", json_seed(
        "granary.examples.Balance", "", reply=True) + u(1, 5) + u(99, 1)
    yield "reply-bad-utf8", json_seed(
        "granary.examples.PingReply", "", reply=True) + b(1, b"\xff\xfe")


# --- admin HTTP ------------------------------------------------------------------


def admin_http_seeds():
    auth = "Authorization: Bearer fuzz-token\r\n"
    yield "healthz", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    yield "metrics", ("GET /metrics HTTP/1.1\r\n" + auth + "\r\n").encode()
    yield "overview-query", ("GET /api/overview?x=1&y=%20 HTTP/1.1\r\n"
                             "authorization: bearer fuzz-token\r\n\r\n").encode()
    yield "dashboard-head", ("HEAD / HTTP/1.0\r\n" + auth + "\r\n").encode()
    yield "post-body", b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
    yield "wrong-token", (b"GET /nope HTTP/1.1\r\n"
                          b"Authorization: Bearer wrong\r\n\r\n")
    yield "body-too-large", (b"GET /metrics HTTP/1.1\r\n"
                             b"Content-Length: 999999\r\n\r\n")
    yield "truncated", b"GET /healthz HTT"
    yield "dot-dot", b"GET /%2e%2e/api/overview HTTP/1.1\r\n\r\n"


# ---------------------------------------------------------------------------------

TARGETS = {
    "gateway_batch": gateway_batch_seeds,
    "grpc_bridge": grpc_bridge_seeds,
    "directory": directory_seeds,
    "membership": membership_seeds,
    "storage_record": storage_record_seeds,
    "cli_json": cli_json_seeds,
    "admin_http": admin_http_seeds,
}


def main():
    for target, seeds in TARGETS.items():
        folder = os.path.join(CORPUS, target)
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):
            if not name.startswith("regression-"):
                os.remove(os.path.join(folder, name))
        for name, data in seeds():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
