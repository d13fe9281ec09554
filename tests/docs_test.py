#!/usr/bin/python3
"""The documentation's code blocks against the code: README.md and docs/*.md.

Every fenced block in sh, bash, shell, console, cpp, c++ or cc carries a tag
after its language on the fence line, and is checked by it:

  ```sh run       executed with `bash -e` in a scratch directory, against a
                  silo with the example grains that this test starts with
                  every listener on port 0. The scratch directory holds the
                  source tree's top-level entries (symlinks, so repository
                  paths work), `build/bin/` with the built binaries (also
                  first on PATH; `granary` given the test silo's gateway by
                  default), and the documented default addresses (gateway
                  127.0.0.1:30000, silo 127.0.0.1:11111, HTTP 127.0.0.1:8080)
                  and /tmp/ are rewritten to the test's own. A run block must
                  end: never a silo in the foreground.
  ```sh check     not runnable here (installs, systemd, kubectl, a silo in
                  the foreground, make targets): `bash -n`, and the checks
                  below.
  ```cpp compile  a complete translation unit: `g++ -std=c++20 -fsyntax-only`
                  with the include directories and definitions the example
                  grains compile with (build/compile_commands.json). Blocks
                  that declare nothing in Granary's namespaces are compiled
                  together, two jobs at a time (see compile_cpp).
  ```cpp fragment declarations appended to the nearest preceding `cpp
                  compile` block of the same file, and compiled with it.

Every sh block (run or check): each `--flag` given to granary-silo, granary or
granary-bench is one the binary lists in --helpfull, each GRANARY_<FLAG>
variable names a granary-silo flag, and each `make TARGET` is a target of the
Makefile. An untagged block, or one with an unknown tag, fails. Also: json
and yaml blocks parse, every relative link points at a file (and at one of
its headings, given an anchor), and README.md links every page in docs/.
A failure names the file and line of the block's fence, with the command's
output.

Usage:
  docs_test.py SILO CLI BENCH PROTOC SOURCE_DIR BUILD_DIR
  docs_test.py --self-test SILO CLI BENCH PROTOC SOURCE_DIR BUILD_DIR
The self-test checks that bad input (an untagged block, misspelled flags, C++
that does not compile, a broken link) is reported, and good blocks are not.
"""
import concurrent.futures
import glob
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

import yaml

SHELL_LANGS = {"sh", "bash", "shell", "console"}
CPP_LANGS = {"cpp", "c++", "cc"}
SHELL_TAGS = {"run", "check"}
CPP_TAGS = {"compile", "fragment"}
BINARIES = ("granary-silo", "granary", "granary-bench")
# Abseil's own flags, which --helpfull does not list.
ABSL_BUILTIN_FLAGS = {"help", "helpfull", "helpshort", "helppackage", "version",
                      "only_check_args", "helpon", "helpmatch"}
# The documented defaults, and what a run block gets instead (set at start).
DEFAULT_ADDRESSES = {"gateway": "127.0.0.1:30000", "silo": "127.0.0.1:11111",
                     "http": "127.0.0.1:8080"}
RUN_TIMEOUT_S = 60
COMPILE_JOBS = 2
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)\s*(.*?)\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


class Block:
    def __init__(self, path, rel, line, lang, tag, text):
        self.path, self.rel, self.line = path, rel, line
        self.lang, self.tag, self.text = lang, tag, text

    def where(self):
        return "%s:%d" % (self.rel, self.line)


def parse_blocks(path, rel):
    """The fenced blocks of a Markdown file, with the line of their fence."""
    blocks = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, tag = m.group(1), m.group(2), m.group(3).lower(), m.group(4)
        start = i + 1
        body = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence[0] * len(fence)) and
                                      lines[i].strip().strip(fence[0]) == ""):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line)
            i += 1
        blocks.append(Block(path, rel, start, lang, tag, "\n".join(body) + "\n"))
        i += 1
    return blocks


def binary_flags(binary):
    """The flags a binary lists in --helpfull (abseil's format)."""
    out = subprocess.run([binary, "--helpfull"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=30).stdout
    flags = set(re.findall(r"^\s+--([A-Za-z0-9_]+) \(", out, re.M))
    if not flags:
        raise SystemExit("docs_test: %s --helpfull lists no flags" % binary)
    return flags | ABSL_BUILTIN_FLAGS


def make_targets(makefile):
    targets = set()
    with open(makefile) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.%-]+(?:\s+[A-Za-z0-9_.%-]+)*)\s*:(?!=)", line)
            if m and not line.startswith("\t"):
                targets.update(m.group(1).split())
    return targets


def shell_commands(text):
    """Each simple command of a shell text, as a list of words (comments,
    quotes and line continuations resolved; operators split off)."""
    joined = re.sub(r"\\\n", " ", text)
    commands = []
    for line in joined.split("\n"):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            words = list(lexer)
        except ValueError:  # an unbalanced quote: words split on blanks
            words = line.split("#", 1)[0].split()
        command = []
        for w in words:
            if w and set(w) <= set(";&|()<>"):
                if command:
                    commands.append(command)
                command = []
            else:
                command.append(w)
        if command:
            commands.append(command)
    return commands


def check_shell_words(block, flags, targets):
    """Flags of Granary's binaries, GRANARY_ variables and make targets."""
    errors = []
    for words in shell_commands(block.text):
        for w in words:
            for var in re.findall(r"(?:^|[\s'\"])GRANARY_([A-Z0-9_]+)=", " " + w):
                if var.lower() not in flags["granary-silo"]:
                    errors.append("GRANARY_%s names no granary-silo flag" % var)
        for i, w in enumerate(words):
            name = os.path.basename(w)
            if name in BINARIES and (w == name or "/" in w):
                for arg in words[i + 1:]:
                    arg = arg.lstrip("[")
                    if arg.startswith("--") and len(arg) > 2:
                        flag = re.split(r"[=\]]", arg[2:], 1)[0]
                        if flag.startswith("no") and flag[2:] in flags[name]:
                            continue
                        if flag not in flags[name]:
                            errors.append("%s has no flag --%s" % (name, flag))
            if w == "make" and (i == 0 or "=" in words[i - 1] or words[i - 1] in ("sudo",)):
                for arg in words[i + 1:]:
                    if arg.startswith("-") or "=" in arg:
                        continue
                    if arg not in targets:
                        errors.append("the Makefile has no target %r" % arg)
    return errors


def bash_syntax(text):
    r = subprocess.run(["bash", "-n"], input=text, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    return None if r.returncode == 0 else r.stdout.strip()


def compile_flags(source, build):
    """-I, -isystem and -D of examples/counter_grain.cc in the build's
    compile_commands.json (the source and gen directories without it)."""
    flags = ["-I" + source, "-I" + os.path.join(build, "gen")]
    db = os.path.join(build, "compile_commands.json")
    if not os.path.exists(db):
        return flags
    with open(db) as f:
        for entry in json.load(f):
            if entry["file"].endswith("examples/counter_grain.cc"):
                words = shlex.split(entry.get("command") or " ".join(entry["arguments"]))
                out = []
                for i, w in enumerate(words):
                    if w in ("-isystem", "-I", "-D") and i + 1 < len(words):
                        out += [w, words[i + 1]]
                    elif w.startswith(("-I", "-D")) and len(w) > 2:
                        out.append(w)
                return out
    return flags


def compile_units(units, flags, workdir):
    """Compiles {key: source}, COMPILE_JOBS at a time; {key: error}."""
    def one(key, source):
        path = os.path.join(workdir, "unit_%s.cc" % re.sub(r"\W", "_", key))
        with open(path, "w") as f:
            f.write(source)
        r = subprocess.run(["g++", "-std=c++20", "-fsyntax-only"] + flags + [path],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300)
        return key, (None if r.returncode == 0 else r.stdout.strip())

    with concurrent.futures.ThreadPoolExecutor(COMPILE_JOBS) as pool:
        results = list(pool.map(lambda kv: one(*kv), units.items()))
    return {k: e for k, e in results if e}


INCLUDE = re.compile(r"^\s*#\s*include\b")
OWN_NAMESPACE = re.compile(r"^\s*namespace\s+granary\b", re.M)


def alone(b):
    """The unit of one block: it compiles as written, file and line kept."""
    return '#line %d "%s"\n%s' % (b.line + 1, b.rel, b.text)


def together(blocks):
    """One unit of several blocks: each block's includes, then its code in a
    namespace of its own. (An include one block forgets may be hidden by an
    earlier block's.)"""
    parts = []
    for n, b in enumerate(blocks):
        lines = b.text.split("\n")
        for i, line in enumerate(lines):
            if INCLUDE.match(line):
                parts.append('#line %d "%s"\n%s' % (b.line + 1 + i, b.rel, line))
        code = "\n".join("" if INCLUDE.match(line) else line for line in lines)
        parts.append('namespace docs_block_%d {\n#line %d "%s"\n%s\n}' % (
            n, b.line + 1, b.rel, code))
    return "\n".join(parts) + "\n"


def compile_cpp(blocks, flags, workdir, log=print):
    """Compiles the compile and fragment blocks; {where: error}.

    A block that declares something in Granary's own namespaces (a grain
    class as the examples write it, which another block or an example
    header may declare too), and a fragment, is a unit of its own; the
    others are compiled together in one unit, which is much faster than a
    unit each. When that unit fails, its blocks are compiled one by one, so
    that the failure names its block."""
    started = time.monotonic()
    units, errors, shared = {}, {}, []
    last_compile = {}
    for b in blocks:
        if b.tag == "fragment":
            base = last_compile.get(b.rel)
            if base is None:
                errors[b.where()] = ("a cpp fragment needs a cpp compile block before it in "
                                     "the same file")
                continue
            units[b.where()] = alone(base) + alone(b)
            continue
        last_compile[b.rel] = b
        if OWN_NAMESPACE.search(b.text):
            units[b.where()] = alone(b)
        else:
            shared.append(b)
    if len(shared) == 1:
        units[shared[0].where()] = alone(shared[0])
    elif shared:
        units["shared"] = together(shared)
    failed = compile_units(units, flags, workdir)
    count = len(units)
    shared_error = failed.pop("shared", None)
    if shared_error:
        again = compile_units({b.where(): alone(b) for b in shared}, flags, workdir)
        count += len(again)
        if not again:  # each compiles alone: an artefact of compiling them together
            log("note: the blocks compiled together failed, each alone compiles:\n" +
                shared_error)
        failed.update(again)
    failed.update(errors)
    log("compiled %d C++ blocks as %d units in %.1f s (%d at a time)" % (
        len(blocks), count, time.monotonic() - started, COMPILE_JOBS))
    return failed


class Scratch:
    """The directory run blocks run in (see the module's docstring)."""

    def __init__(self, root, source, binaries, protoc):
        self.root = root
        self.bin = os.path.join(root, "build", "bin")
        os.makedirs(self.bin)
        os.makedirs(os.path.join(root, "tmp"))
        for entry in os.listdir(source):
            if entry.startswith(".") or entry.startswith("build") or entry == "tmp":
                continue
            os.symlink(os.path.join(source, entry), os.path.join(root, entry))
        self.binaries = binaries
        self.protoc_dir = os.path.dirname(protoc)
        self.silo = None
        self.addresses = {}

    def start_silo(self):
        data = os.path.join(self.root, ".silo-data")
        self.silo_log = open(os.path.join(self.root, ".silo.log"), "w")
        self.silo = subprocess.Popen(
            [self.binaries["granary-silo"], "--examples", "--bench_grains",
             "--gateway=127.0.0.1:0", "--silo=127.0.0.1:0", "--http=127.0.0.1:0",
             "--data_dir=" + data, "--log_level=warning"],
            stdout=subprocess.PIPE, stderr=self.silo_log, text=True)
        ready = self.silo.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise SystemExit("docs_test: the silo did not start: %r" % ready)
        self.addresses = dict(w.split("=", 1) for w in ready[1:])
        for name, real in self.binaries.items():
            extra = ' --gateway="%s"' % self.addresses["gateway"] if name == "granary" else ""
            wrapper = os.path.join(self.bin, name)
            with open(wrapper, "w") as f:
                f.write('#!/bin/bash\nexec "%s"%s "$@"\n' % (real, extra))
            os.chmod(wrapper, 0o755)

    def stop_silo(self):
        if self.silo:
            self.silo.send_signal(signal.SIGTERM)
            try:
                self.silo.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.silo.kill()
            self.silo_log.close()

    def rewrite(self, text):
        for name, default in DEFAULT_ADDRESSES.items():
            text = text.replace(default, self.addresses[name])
        return re.sub(r"(?<![\w./])/tmp/", os.path.join(self.root, "tmp") + "/", text)

    def run(self, block):
        script = self.rewrite(block.text)
        env = {"PATH": "%s:%s:/usr/bin:/bin" % (self.bin, self.protoc_dir),
               "HOME": self.root, "TMPDIR": os.path.join(self.root, "tmp"),
               "LANG": "C.UTF-8"}
        out_path = os.path.join(self.root, ".block.out")
        with open(out_path, "w") as out:
            # Its own session: whatever it leaves in the background is
            # killed with it. Output to a file: a background job keeps a
            # pipe open.
            p = subprocess.Popen(["bash", "-e", "-c", script], cwd=self.root, env=env,
                                 stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code = p.wait(timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                code = "timeout after %d s" % RUN_TIMEOUT_S
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        with open(out_path) as f:
            output = f.read()
        if code != 0:
            return "exit %s:\n%s\n--- the block as run ---\n%s" % (code, output.strip(), script)
        return None


def anchors(path):
    """The anchors of a Markdown file's headings, as GitHub makes them."""
    found = set()
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                in_fence = not in_fence
            elif not in_fence and re.match(r"^#{1,6} ", line):
                title = line.lstrip("#").strip().lower()
                found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def check_links(files):
    """Relative links point at files (and at headings there), and README.md
    links every page of docs/."""
    errors = []
    linked = set()
    for path, rel in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for n, line in enumerate(text.split("\n"), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                file_part, _, anchor = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                if rel == "README.md":
                    linked.add(os.path.relpath(resolved, os.path.dirname(path)))
                if not os.path.exists(resolved):
                    errors.append("%s:%d: the link %s points at nothing" % (rel, n, target))
                elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                    errors.append("%s:%d: the link %s names no heading of %s" % (
                        rel, n, target, os.path.basename(resolved)))
    for path, rel in files:
        if rel.startswith("docs/") and rel not in linked:
            errors.append("README.md does not link %s" % rel)
    return errors


def check_docs(files, source, build, flags, targets, scratch=None, log=print):
    """Checks the blocks of `files` [(path, rel)]; returns the failures as
    (where, message) and prints what it did per file."""
    failures = []
    counts = {}
    blocks = []
    for path, rel in files:
        counts[rel] = {"run": 0, "check": 0, "compile": 0, "fragment": 0, "data": 0}
        blocks += parse_blocks(path, rel)
    cpp = []
    runs = []
    for b in blocks:
        if b.lang in SHELL_LANGS:
            if b.tag not in SHELL_TAGS:
                failures.append((b.where(), "a %s block needs a tag: ```%s run or ```%s check "
                                 "(has %r)" % (b.lang, b.lang, b.lang, b.tag)))
                continue
            problem = bash_syntax(b.text)
            if problem:
                failures.append((b.where(), "bash -n: " + problem))
            for e in check_shell_words(b, flags, targets):
                failures.append((b.where(), e))
            counts[b.rel][b.tag] += 1
            if b.tag == "run":
                runs.append(b)
        elif b.lang in CPP_LANGS:
            if b.tag not in CPP_TAGS:
                failures.append((b.where(), "a %s block needs a tag: ```%s compile or ```%s "
                                 "fragment (has %r)" % (b.lang, b.lang, b.lang, b.tag)))
                continue
            counts[b.rel][b.tag] += 1
            cpp.append(b)
        elif b.lang in ("json", "yaml", "yml"):
            try:
                if b.lang == "json":
                    json.loads(b.text)
                else:
                    list(yaml.safe_load_all(b.text))
                counts[b.rel]["data"] += 1
            except (ValueError, yaml.YAMLError) as e:
                failures.append((b.where(), "%s does not parse: %s" % (b.lang, e)))
    with tempfile.TemporaryDirectory() as workdir:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            compiled = pool.submit(compile_cpp, cpp, compile_flags(source, build), workdir, log)
            if runs and scratch is None:
                raise SystemExit("docs_test: run blocks but no scratch directory")
            if runs:
                started = time.monotonic()
                scratch.start_silo()
                try:
                    for b in runs:
                        problem = scratch.run(b)
                        if problem:
                            failures.append((b.where(), problem))
                finally:
                    scratch.stop_silo()
                log("ran %d sh blocks against a silo in %.1f s" % (
                    len(runs), time.monotonic() - started))
            for where, error in sorted(compiled.result().items()):
                failures.append((where, "does not compile:\n" + error))
    failures += [("links", e) for e in check_links(files)]
    for rel, c in counts.items():
        log("%-32s %2d run, %2d check, %2d compile, %d fragment, %d json/yaml" % (
            rel, c["run"], c["check"], c["compile"], c["fragment"], c["data"]))
    total = {k: sum(c[k] for c in counts.values()) for k in ("run", "check", "compile")}
    log("%d files: %d sh blocks run, %d checked, %d C++ blocks compiled" % (
        len(files), total["run"], total["check"], total["compile"]))
    return failures


def doc_files(source):
    files = [(os.path.join(source, "README.md"), "README.md")]
    for path in sorted(glob.glob(os.path.join(source, "docs", "*.md"))):
        files.append((path, "docs/" + os.path.basename(path)))
    return files


SELF_TEST_DOC = """# Bad blocks

```sh
granary status
```

```sh check
build/bin/granary-silo --examples --gatway=127.0.0.1:0
```

```cpp compile
#include "core/status.h"
absl::Status status = granary::NoSuchFunction();
```

```sh check
build/bin/granary-silo --examples --gateway=127.0.0.1:0
```

```cpp compile
#include "core/status.h"
namespace granary {
absl::Status Fine() { return absl::OkStatus(); }
}  // namespace granary
```
"""

# A page of docs/ with one bad block, and the README's link to it.
SELF_TEST_PAGE = """# Another page

```sh check
granary --gateway=127.0.0.1:30000 --no_such_flag status
```
"""


def self_test(source, build, flags, targets):
    """Bad blocks are reported, each at its line; good ones are not."""
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "docs"))
        readme = os.path.join(tmp, "README.md")
        with open(readme, "w") as f:
            f.write(SELF_TEST_DOC + "\n[another page](docs/page.md), [no page](docs/gone.md)\n")
        page = os.path.join(tmp, "docs", "page.md")
        with open(page, "w") as f:
            f.write(SELF_TEST_PAGE)
        files = [(readme, "README.md"), (page, "docs/page.md")]
        failures = check_docs(files, source, build, flags, targets, log=lambda *a: None)
    want = {"README.md:3": "needs a tag", "README.md:7": "has no flag --gatway",
            "README.md:11": "does not compile", "docs/page.md:3": "has no flag --no_such_flag",
            "links": "docs/gone.md points at nothing"}
    ok = True
    for where, what in want.items():
        got = [m for w, m in failures if w == where and what in m]
        print("self-test: %s %s: %s" % (where, what, "reported" if got else "NOT REPORTED"))
        if got:
            print("  " + got[0].split("\n", 2)[0] + (
                "\n  " + got[0].split("\n")[1] if "\n" in got[0] else ""))
        ok = ok and bool(got)
    unexpected = [(w, m) for w, m in failures if w not in want]
    for w, m in unexpected:
        print("self-test: reported, but should not be: %s: %s" % (w, m))
    return ok and not unexpected


def main(argv):
    test_self = "--self-test" in argv
    args = [a for a in argv if a != "--self-test"]
    if len(args) != 6:
        raise SystemExit(__doc__)
    silo, cli, bench, protoc, source, build = (os.path.abspath(a) for a in args)
    binaries = {"granary-silo": silo, "granary": cli, "granary-bench": bench}
    started = time.monotonic()
    flags = {name: binary_flags(path) for name, path in binaries.items()}
    targets = make_targets(os.path.join(source, "Makefile"))
    if test_self:
        ok = self_test(source, build, flags, targets)
        print("docs_test --self-test: %s (%.1f s)" % ("ok" if ok else "FAILED",
                                                       time.monotonic() - started))
        return 0 if ok else 1
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Scratch(tmp, source, binaries, protoc)
        failures = check_docs(doc_files(source), source, build, flags, targets, scratch)
    for where, message in failures:
        print("FAILED %s: %s" % (where, message), file=sys.stderr)
    print("docs_test: %s, %.1f s" % ("%d failures" % len(failures) if failures else "ok",
                                     time.monotonic() - started))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
