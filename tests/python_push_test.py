#!/usr/bin/python3
"""Server push to clients in other languages: starts granary-silo and watches
a granary.examples.Chat room from Python (protoc's Python output and grpcio,
nothing else) and from the `granary` CLI at once. Both must print every
post, in order. Then the silo is killed with SIGKILL: both streams must end
with UNAVAILABLE, and watching again on a restarted silo must work. Bad
input (no key, a payload that does not parse) is refused with
INVALID_ARGUMENT."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

silo_bin, cli_bin, protoc, source = sys.argv[1:5]
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAILED:", what, file=sys.stderr)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


with tempfile.TemporaryDirectory() as tmp:
    gen = os.path.join(tmp, "gen")
    os.makedirs(gen)
    subprocess.run([protoc, "-I", os.path.join(source, "proto"), "-I", source,
                    "--python_out=" + gen, os.path.join(source, "examples/chat.proto"),
                    os.path.join(source, "proto/granary/options.proto")], check=True)
    sys.path.insert(0, gen)
    import grpc  # noqa: E402
    from examples import chat_pb2  # noqa: E402

    port = free_port()
    gateway = "127.0.0.1:%d" % port

    def start_silo():
        silo = subprocess.Popen(
            [silo_bin, "--examples", "--gateway=" + gateway, "--silo=127.0.0.1:0",
             "--http=127.0.0.1:0", "--data_dir=" + os.path.join(tmp, "data"),
             "--log_level=warning"],
            stdout=subprocess.PIPE, text=True)
        ready = silo.stdout.readline().split()
        check(ready and ready[0] == "READY", "READY line: %r" % (ready,))
        return silo

    silo = start_silo()
    channel = grpc.insecure_channel(gateway)
    post = channel.unary_unary("/granary.examples.Chat/Post",
                               request_serializer=chat_pb2.PostRequest.SerializeToString,
                               response_deserializer=chat_pb2.PostReply.FromString)
    watch = channel.unary_stream("/granary.examples.Chat/Watch",
                                 request_serializer=chat_pb2.WatchRequest.SerializeToString,
                                 response_deserializer=chat_pb2.ChatMessage.FromString)
    room = [("granary-key", "lobby")]

    class Watcher(threading.Thread):
        """Reads a Python stream to its end."""

        def __init__(self, after_seq=0):
            super().__init__(daemon=True)
            self.call = watch(chat_pb2.WatchRequest(after_seq=after_seq), metadata=room,
                              wait_for_ready=True)
            self.messages = []
            self.code = None

        def run(self):
            try:
                for m in self.call:
                    self.messages.append((m.seq, m.author, m.text))
                self.code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                self.code = e.code()

    try:
        py = Watcher()
        py.start()
        cli = subprocess.Popen([cli_bin, "--gateway=" + gateway, "call", "Chat/lobby",
                                "Watch", "{}"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        cli_lines = []

        def read_cli():
            for line in cli.stdout:
                cli_lines.append(line)

        cli_reader = threading.Thread(target=read_cli, daemon=True)
        cli_reader.start()
        # Both are subscribed once a post reaches two watchers.
        deadline = time.time() + 30
        delivered = 0
        while time.time() < deadline:
            delivered = post(chat_pb2.PostRequest(author="probe", text="hello"),
                             metadata=room).delivered
            if delivered >= 2:
                break
            time.sleep(0.05)
        check(delivered == 2, "two watchers subscribed: %d" % delivered)
        last_probe = post(chat_pb2.PostRequest(author="x", text="y"), metadata=room).seq
        n = 300
        for i in range(n):
            post(chat_pb2.PostRequest(author="py", text="m%d" % i), metadata=room)
        first_seq = last_probe + 1
        want = [(first_seq + i, "py", "m%d" % i) for i in range(n)]

        # The CLI prints one JSON object per line, as each message arrives.
        import json
        last = '"m%d"' % (n - 1)
        for _ in range(300):
            if any(last in l for l in list(cli_lines)):
                break
            time.sleep(0.1)
        cli_got = [json.loads(l) for l in list(cli_lines)]
        cli_py = [(int(m["seq"]), m["author"], m["text"]) for m in cli_got
                  if m.get("author") == "py"]
        check(cli_py == want, "the CLI printed every post in order (%d of %d)"
              % (len(cli_py), n))
        for _ in range(300):
            if len([m for m in py.messages if m[1] == "py"]) >= n:
                break
            time.sleep(0.1)
        py_got = [m for m in py.messages if m[1] == "py"]
        check(py_got == want, "Python got every post in order (%d of %d)"
              % (len(py_got), n))

        # Bad input.
        try:
            list(watch(chat_pb2.WatchRequest(), metadata=[("granary-key", "")]))
            check(False, "empty key refused")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "empty key: %s" % e.code())
        raw = channel.unary_stream("/granary.examples.Chat/Watch",
                                   request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
        try:
            list(raw(b"\xff\xff\xff", metadata=room))
            check(False, "garbage payload refused")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT,
                  "garbage payload: %s" % e.code())

        # The silo dies: both streams end UNAVAILABLE.
        silo.send_signal(signal.SIGKILL)
        silo.wait(timeout=60)
        py.join(timeout=60)
        check(py.code == grpc.StatusCode.UNAVAILABLE, "Python stream ended %s" % py.code)
        cli.wait(timeout=60)
        cli_reader.join(timeout=10)
        err = cli.stderr.read()
        check(cli.returncode != 0 and "UNAVAILABLE" in err,
              "the CLI's stream ended UNAVAILABLE: %d %r" % (cli.returncode, err))

        # Watching again, on the restarted silo.
        silo = start_silo()
        again = None
        deadline = time.time() + 30
        while time.time() < deadline:
            again = Watcher()
            again.start()
            d = post(chat_pb2.PostRequest(author="py", text="back"), metadata=room,
                     wait_for_ready=True).delivered
            if d == 1:
                break
            again.call.cancel()
            again.join(timeout=10)
            time.sleep(0.1)
        for _ in range(100):
            if again.messages and again.messages[-1][2] == "back":
                break
            time.sleep(0.1)
        check(bool(again.messages) and again.messages[-1][1:] == ("py", "back"),
              "the new subscription got the new post: %r" % (again.messages,))
        again.call.cancel()
        again.join(timeout=10)
        check(again.code == grpc.StatusCode.CANCELLED, "cancelled: %s" % again.code)
    finally:
        silo.send_signal(signal.SIGTERM)
        code = silo.wait(timeout=60)
    check(code == 0, "exit code %d after SIGTERM" % code)

print("%d passed, %d failed" % (checks - len(failures), len(failures)))
sys.exit(1 if failures else 0)
