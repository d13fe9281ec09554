#!/usr/bin/python3
"""Manifest drift: the deployment files still describe a silo that starts.

Reads deploy/container/Dockerfile, deploy/compose/compose.yaml and every
resource of deploy/k8s/kustomization.yaml (YAML through python3-yaml) and
checks, for every silo container:
  - its command, arguments and environment (the image's ENV, Compose's
    environment, Kubernetes' env, envFrom ConfigMaps, $(VAR) references and
    downward-API fields) pass `granary-silo --check_config`, with the
    certificates the files' own instructions make (scripts/dev-certs.sh) at
    the paths their volumes mount;
  - each probe or health check asks a path the silo serves (a real silo is
    started on loopback and asked), on the port it serves HTTP on;
  - Services and ports name the ports the silo listens on, the stop grace
    period is longer than --shutdown_timeout, and the image runs as non-root
    and refuses plaintext off loopback unless told otherwise;
  - the migrate job runs `granary db migrate` with flags the CLI knows.
With kubectl on PATH, `kubectl kustomize` must also render deploy/k8s.

Usage: manifests_test.py SILO_BINARY CLI_BINARY SOURCE_DIR
"""

import copy
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import yaml

FAILURES = []


def fail(what):
    FAILURES.append(what)
    print("FAIL:", what, file=sys.stderr)


def duration_seconds(text):
    """An Abseil duration ("30s", "1m30s", "500ms") in seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    parts = re.findall(r"([0-9.]+)(h|ms|us|ns|m|s)", str(text))
    if not parts or "".join(n + u for n, u in parts) != str(text):
        raise ValueError("not a duration: %r" % text)
    return sum(float(n) * units[u] for n, u in parts)


def port_of(address):
    return int(address.rsplit(":", 1)[1])


class Paths:
    """Container paths -> directories of this test (longest mount first)."""

    def __init__(self, mounts):
        self.mounts = sorted(mounts.items(), key=lambda kv: -len(kv[0]))

    def map(self, value):
        for inside, outside in self.mounts:
            value = re.sub(r"(?<![\w/])" + re.escape(inside) + r"(?=/|$|\s|,)",
                           outside, value)
        return value


def check_config(silo, name, env, args, paths, expect=0):
    """Runs granary-silo --check_config as the container would."""
    run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for k, v in env.items():
        run_env[k] = paths.map(str(v))
    argv = [silo] + [paths.map(a) for a in args] + ["--check_config"]
    p = subprocess.run(argv, env=run_env, capture_output=True, text=True,
                       timeout=60)
    if p.returncode != expect:
        fail("%s: --check_config exits %d, not %d:\n%s%s" %
             (name, p.returncode, expect, p.stdout[-2000:], p.stderr[-2000:]))
    elif p.returncode == 0:
        # The silo ignores GRANARY_ variables that name no flag: a typo
        # would go unnoticed there, so it is caught here.
        known = set(re.findall(r"^--(\w+)=", p.stdout, re.M))
        known |= {"config", "check_config"}
        for k in env:
            if k.startswith("GRANARY_") and k[8:].lower() not in known:
                fail("%s: %s names no flag of granary-silo" % (name, k))
    return p


def dev_certs_command(text, marker):
    """The scripts/dev-certs.sh command a file's comments give."""
    lines = [l.lstrip("#").strip() for l in text.splitlines()
             if l.startswith("#")]
    for i, line in enumerate(lines):
        if line.startswith("scripts/dev-certs.sh"):
            cmd = line
            while cmd.endswith("\\"):
                i += 1
                cmd = cmd[:-1] + " " + lines[i]
            words = shlex.split(cmd)
            if marker not in words:
                fail("the dev-certs.sh command does not write %s: %s" %
                     (marker, cmd))
            return words
    fail("no scripts/dev-certs.sh command in the comments (%s)" % marker)
    return None


def make_certs(src, words, marker, into):
    argv = ["bash", os.path.join(src, words[0])] + [
        into if w == marker else w for w in words[1:]]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail("%s exits %d: %s" % (" ".join(words), p.returncode, p.stderr))


def dockerfile(src):
    """ENV, USER, ENTRYPOINT and HEALTHCHECK of the runtime stage."""
    text = open(os.path.join(src, "deploy/container/Dockerfile")).read()
    text = re.sub(r"\\\n", " ", text)
    stages = re.split(r"^FROM ", text, flags=re.M)
    runtime = stages[-1]
    if not runtime.startswith("debian:12-slim"):
        fail("the runtime stage is not FROM debian:12-slim")
    if not stages[1].startswith("debian:12 "):
        fail("the build stage is not FROM debian:12")
    env = {}
    user = entry = health = None
    for line in runtime.splitlines():
        line = line.strip()
        if line.startswith("ENV "):
            for k, v in re.findall(r"(\w+)=(\S+)", line[4:]):
                env[k] = v
        elif line.startswith("USER "):
            user = line[5:].strip()
        elif line.startswith("ENTRYPOINT "):
            entry = yaml.safe_load(line[len("ENTRYPOINT "):])
        elif line.startswith("HEALTHCHECK "):
            health = line
    if user is None or user.split(":")[0] in ("0", "root"):
        fail("the image runs as root (USER %r)" % user)
    if entry != ["/usr/bin/granary-silo"]:
        fail("the image's entrypoint is %r, not granary-silo" % entry)
    if health is None or "/healthz" not in health or "GRANARY_HTTP" not in health:
        fail("the image's HEALTHCHECK does not ask /healthz on GRANARY_HTTP's "
             "port: %r" % health)
    return env, user


def served_paths(silo, tmp, paths):
    """HTTP status of each path on a real silo (loopback, any ports)."""
    data = os.path.join(tmp, "probe-silo")
    os.makedirs(data)
    p = subprocess.Popen(
        [silo, "--gateway=127.0.0.1:0", "--silo=127.0.0.1:0",
         "--http=127.0.0.1:0", "--data_dir=" + data, "--log_level=warning"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    status = {}
    try:
        ready = p.stdout.readline()
        http = re.search(r"http=(\S+)", ready)
        if not http:
            fail("the probe silo printed no READY line: %r" % ready)
            return status
        for path in paths:
            try:
                with urllib.request.urlopen("http://%s%s" % (http.group(1), path),
                                            timeout=10) as r:
                    status[path] = r.status
            except urllib.error.HTTPError as e:
                status[path] = e.code
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    return status


def check_compose(silo, cli, src, tmp, image_env, probes):
    path = os.path.join(src, "deploy/compose/compose.yaml")
    text = open(path).read()
    doc = yaml.safe_load(text)
    certs = os.path.join(tmp, "compose-secrets")
    words = dev_certs_command(text, "deploy/compose/certs")
    if words:
        make_certs(src, words, "deploy/compose/certs", certs)
    services = doc.get("services", {})
    # The secrets job copies the certificates and writes conninfo.
    with open(os.path.join(certs, "conninfo"), "w") as f:
        f.write("host=postgres user=granary dbname=granary password=x\n")
    secrets_job = " ".join(services.get("secrets", {}).get("command", []))
    for name in ("cp ", "conninfo", "chown"):
        if name not in secrets_job:
            fail("compose: the secrets job does not %r" % name)
    data = os.path.join(tmp, "compose-data")
    os.makedirs(data)
    silos = 0
    for name, svc in services.items():
        vols = {}
        for v in svc.get("volumes", []):
            source, target = v.split(":")[:2]
            if source == "secrets":
                vols[target] = certs
        vols["/var/lib/granary"] = data
        paths = Paths(vols)
        if svc.get("entrypoint") == ["/usr/bin/granary"]:
            check_migrate("compose " + name, cli, svc.get("command", []),
                          paths)
            continue
        if "image" not in svc or not svc["image"].startswith("granary:"):
            continue
        if svc.get("entrypoint") is not None:
            continue  # a job of its own (the secrets copier)
        silos += 1
        env = dict(image_env)
        env.update({k: str(v) for k, v in svc.get("environment", {}).items()})
        check_config(silo, "compose " + name, env, svc.get("command", []),
                     paths)
        grace = duration_seconds(svc.get("stop_grace_period", "10s"))
        shutdown = duration_seconds(env.get("GRANARY_SHUTDOWN_TIMEOUT", "30s"))
        if grace <= shutdown:
            fail("compose %s: stop_grace_period %ss is not longer than the "
                 "shutdown timeout %ss" % (name, grace, shutdown))
        for mapping in svc.get("ports", []):
            inside = int(str(mapping).rsplit(":", 1)[1])
            if inside not in (port_of(env["GRANARY_GATEWAY"]),
                              port_of(env["GRANARY_HTTP"])):
                fail("compose %s publishes port %d, which the silo does not "
                     "serve" % (name, inside))
        probes.append(("compose " + name + " (image HEALTHCHECK)", "/healthz",
                       port_of(env["GRANARY_HTTP"]),
                       port_of(env["GRANARY_HTTP"])))
    if silos != 3:
        fail("compose: %d silos, not 3" % silos)
    for dep in ("postgres", "migrate"):
        if dep not in services:
            fail("compose: no %s service" % dep)


def check_migrate(name, cli, args, paths):
    if args[:2] != ["db", "migrate"]:
        fail("%s: runs %r, not `granary db migrate`" % (name, args))
        return
    known = subprocess.run([cli, "--help"], capture_output=True,
                           text=True).stdout
    for a in args[2:]:
        flag = a.split("=")[0]
        if flag.lstrip("-") not in known:
            fail("%s: the CLI has no flag %s" % (name, flag))
        if "=" in a and a.split("=", 1)[1].startswith("/"):
            f = paths.map(a.split("=", 1)[1])
            if not os.path.exists(f):
                fail("%s: %s names a file its volumes do not hold" % (name, a))


def expand(value, env):
    """Kubernetes' $(VAR) references to earlier variables."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)),
                  value)


def check_k8s(silo, cli, src, tmp, probes):
    base = os.path.join(src, "deploy/k8s")
    ktext = open(os.path.join(base, "kustomization.yaml")).read()
    kust = yaml.safe_load(ktext)
    namespace = kust.get("namespace", "default")
    docs = []
    for r in kust.get("resources", []):
        with open(os.path.join(base, r)) as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    secrets = os.path.join(tmp, "k8s-secrets")
    words = dev_certs_command(ktext, "deploy/k8s/secrets")
    if words:
        make_certs(src, words, "deploy/k8s/secrets", secrets)
    # As the comment at the top of kustomization.yaml has them written: the
    # database's CA, and a connection string that asks for verify-full (a
    # database off the silo's machine needs it).
    with open(os.path.join(secrets, "pg-ca.pem"), "w") as f:
        f.write(open(os.path.join(secrets, "ca.pem")).read()
                if os.path.exists(os.path.join(secrets, "ca.pem")) else "")
    if "sslmode=verify-full" not in ktext:
        fail("k8s: the documented connection string does not ask for sslmode=verify-full")
    with open(os.path.join(secrets, "conninfo"), "w") as f:
        f.write("host=db user=granary dbname=granary password=x sslmode=verify-full "
                "sslrootcert=/etc/granary/secrets/pg-ca.pem\n")
    generated = {}
    for gen in kust.get("secretGenerator", []):
        for entry in gen.get("files", []):
            key, _, file = entry.rpartition("=")
            file_name = os.path.basename(file)
            if not os.path.exists(os.path.join(secrets, file_name)):
                fail("k8s: secretGenerator lists %s, which the documented "
                     "commands do not make" % file)
        generated[gen["name"]] = secrets
    config_maps = {d["metadata"]["name"]: d.get("data", {})
                   for d in docs if d["kind"] == "ConfigMap"}
    services = [d for d in docs if d["kind"] == "Service"]
    workloads = [d for d in docs
                 if d["kind"] in ("StatefulSet", "Deployment", "Job")]
    kinds = {d["kind"] for d in docs}
    for kind in ("StatefulSet", "Service", "PodDisruptionBudget", "ConfigMap",
                 "Job"):
        if kind not in kinds:
            fail("k8s: no %s" % kind)
    data = os.path.join(tmp, "k8s-data")
    os.makedirs(data)
    silos = 0
    for w in workloads:
        spec = w["spec"]["template"]["spec"]
        labels = w["spec"]["template"].get("metadata", {}).get("labels", {})
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        grace = spec.get("terminationGracePeriodSeconds", 30)
        if spec.get("securityContext", {}).get("runAsNonRoot") is not True:
            fail("k8s %s: runAsNonRoot is not set" % w["metadata"]["name"])
        for c in spec["containers"]:
            name = "k8s %s/%s" % (w["metadata"]["name"], c["name"])
            mounts = {}
            for m in c.get("volumeMounts", []):
                v = volumes.get(m["name"], {})
                if "secret" in v:
                    mounts[m["mountPath"]] = generated.get(
                        v["secret"]["secretName"], "/nonexistent")
                elif "emptyDir" in v:
                    mounts[m["mountPath"]] = data
            paths = Paths(mounts)
            command = c.get("command", ["/usr/bin/granary-silo"])
            if command == ["/usr/bin/granary"]:
                check_migrate(name, cli, c.get("args", []), paths)
                continue
            if command != ["/usr/bin/granary-silo"]:
                fail("%s: runs %r" % (name, command))
                continue
            silos += 1
            # Every pod of a StatefulSet (its configuration differs by the
            # pod's name: its address, its own certificate), else one.
            pods = (w["spec"].get("replicas", 1)
                    if w["kind"] == "StatefulSet" else 1)
            certificates = set()
            for ordinal in range(pods):
                env = {}
                for ef in c.get("envFrom", []):
                    ref = ef.get("configMapRef", {}).get("name")
                    if ref not in config_maps:
                        fail("%s: envFrom names ConfigMap %r, which is not "
                             "there" % (name, ref))
                    env.update({k: str(v) for k, v in
                                config_maps.get(ref, {}).items()})
                fields = {"metadata.name": "%s-%d" % (w["metadata"]["name"],
                                                      ordinal),
                          "metadata.namespace": namespace,
                          "status.podIP": "10.0.0.%d" % (5 + ordinal)}
                for e in c.get("env", []):
                    if "value" in e:
                        env[e["name"]] = expand(str(e["value"]), env)
                    elif "fieldRef" in e.get("valueFrom", {}):
                        env[e["name"]] = fields[
                            e["valueFrom"]["fieldRef"]["fieldPath"]]
                    else:
                        fail("%s: env %s comes from %r" % (
                            name, e["name"], e.get("valueFrom")))
                check_config(silo, "%s (pod %d)" % (name, ordinal), env,
                             c.get("args", []), paths)
                certificates.add(env.get("GRANARY_CLUSTER_TLS_CERT"))
            # A certificate per pod: one pod's key speaks for it alone.
            if None in certificates or len(certificates) != pods:
                fail("%s: its %d pods do not each have a silo certificate of "
                     "their own (%r)" % (name, pods, sorted(
                         str(c) for c in certificates)))
            shutdown = duration_seconds(env.get("GRANARY_SHUTDOWN_TIMEOUT",
                                                "30s"))
            if grace <= shutdown:
                fail("%s: terminationGracePeriodSeconds %s is not longer "
                     "than the shutdown timeout %ss" % (name, grace, shutdown))
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            wanted = {"gateway": port_of(env["GRANARY_GATEWAY"]),
                      "silo": port_of(env["GRANARY_SILO"]),
                      "http": port_of(env["GRANARY_HTTP"])}
            if ports != wanted:
                fail("%s: container ports %r are not the silo's %r" %
                     (name, ports, wanted))
            if port_of(env.get("GRANARY_SILO_ADVERTISE", ":0")) != wanted["silo"]:
                fail("%s: GRANARY_SILO_ADVERTISE's port is not the silo port"
                     % name)
            for kind, path in (("livenessProbe", "/healthz"),
                               ("startupProbe", "/healthz"),
                               ("readinessProbe", "/readyz")):
                probe = c.get(kind)
                if probe is None:
                    if kind != "startupProbe":
                        fail("%s: no %s" % (name, kind))
                    continue
                get = probe.get("httpGet", {})
                if get.get("path") != path:
                    fail("%s: %s asks %r, not %s" % (name, kind,
                                                     get.get("path"), path))
                port = get.get("port")
                port = ports.get(port, port)
                probes.append(("%s %s" % (name, kind), get.get("path"), port,
                               wanted["http"]))
            for s in services:
                sel = s["spec"].get("selector", {})
                if not sel or any(labels.get(k) != v for k, v in sel.items()):
                    continue
                for p in s["spec"]["ports"]:
                    target = p.get("targetPort", p["port"])
                    number = ports.get(target, target)
                    if number not in wanted.values():
                        fail("k8s Service %s: port %r reaches %r, which the "
                             "silo does not serve" % (s["metadata"]["name"],
                                                      p["name"], target))
        if w["kind"] == "StatefulSet":
            headless = [s for s in services
                        if s["metadata"]["name"] == w["spec"].get("serviceName")]
            if not headless or headless[0]["spec"].get("clusterIP") != "None":
                fail("k8s: the StatefulSet's serviceName is not a headless "
                     "Service")
            strategy = w["spec"].get("updateStrategy", {}).get("type",
                                                               "RollingUpdate")
            if strategy != "RollingUpdate":
                fail("k8s: the StatefulSet does not roll (%s)" % strategy)
    for pdb in (d for d in docs if d["kind"] == "PodDisruptionBudget"):
        sel = pdb["spec"]["selector"]["matchLabels"]
        if not any(all(w["spec"]["template"]["metadata"]["labels"].get(k) == v
                       for k, v in sel.items())
                   for w in workloads if w["kind"] != "Job"):
            fail("k8s: the PodDisruptionBudget selects no silo")
    if silos == 0:
        fail("k8s: no silo container")
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("kubectl not found: `kubectl kustomize` not tried")
        return
    copy_dir = os.path.join(tmp, "k8s")
    shutil.copytree(base, copy_dir, ignore=shutil.ignore_patterns("secrets"))
    shutil.copytree(secrets, os.path.join(copy_dir, "secrets"))
    p = subprocess.run([kubectl, "kustomize", copy_dir], capture_output=True,
                       text=True, timeout=120)
    if p.returncode != 0:
        fail("kubectl kustomize deploy/k8s: %s" % p.stderr)
        return
    rendered = [d for d in yaml.safe_load_all(p.stdout) if d]
    secret = [d["metadata"]["name"] for d in rendered if d["kind"] == "Secret"]
    sts = [d for d in rendered if d["kind"] == "StatefulSet"]
    if not secret or not sts:
        fail("kubectl kustomize renders no Secret or no StatefulSet")
        return
    names = [v.get("secret", {}).get("secretName")
             for v in sts[0]["spec"]["template"]["spec"]["volumes"]]
    if secret[0] not in names:
        fail("the rendered StatefulSet does not mount the generated Secret "
             "%s (%r)" % (secret[0], names))
    print("kubectl kustomize: %d objects" % len(rendered))


def main():
    silo, cli, src = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="granary-manifests-")
    try:
        image_env, _ = dockerfile(src)
        # Secure by default: the image's own configuration listens off
        # loopback, so it is refused without TLS, and accepted when
        # plaintext is asked for.
        paths = Paths({"/var/lib/granary": tmp})
        p = check_config(silo, "the image's ENV", image_env, [], paths,
                         expect=2)
        if "loopback" not in p.stderr:
            fail("the image's refusal does not say why: %s" % p.stderr)
        token = os.path.join(tmp, "http-token")
        with open(token, "w") as f:
            f.write("0123456789abcdef0123456789abcdef\n")
        # Plaintext alone is not enough: a gateway off loopback that
        # authenticates nobody needs GRANARY_ALLOW_ANONYMOUS too.
        open_env = dict(image_env, GRANARY_ALLOW_PLAINTEXT="true",
                        GRANARY_HTTP_TOKEN_FILE=token)
        p = check_config(silo, "the image's ENV with GRANARY_ALLOW_PLAINTEXT only",
                         open_env, [], paths, expect=2)
        if "--allow_anonymous" not in p.stderr:
            fail("an anonymous gateway's refusal does not name "
                 "--allow_anonymous: %s" % p.stderr)
        open_env["GRANARY_ALLOW_ANONYMOUS"] = "true"
        check_config(silo, "the image's ENV with GRANARY_ALLOW_PLAINTEXT and "
                     "GRANARY_ALLOW_ANONYMOUS", open_env, [], paths)
        probes = []
        check_compose(silo, cli, src, tmp, image_env, probes)
        check_k8s(silo, cli, src, tmp, probes)
        status = served_paths(silo, tmp, sorted({p[1] for p in probes}))
        for what, path, port, http_port in probes:
            if port != http_port:
                fail("%s asks port %r, not the HTTP port %d" % (what, port,
                                                               http_port))
            if status.get(path) not in (200, 503):
                fail("%s asks %s, which the silo answers %r" %
                     (what, path, status.get(path)))
        print("checked %d probes; the silo answers %r" % (len(probes), status))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print("%d failures" % len(FAILURES), file=sys.stderr)
        sys.exit(1)
    print("manifests_test: ok")


if __name__ == "__main__":
    main()
