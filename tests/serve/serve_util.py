"""What the Python serve tests share, written once: the ok/FAIL tally, writing a model repository, starting
`ringside serve` and reading its ports off the banner, stopping it, plain HTTP requests, /metrics, and the
/proc figures (VmHWM, Threads) the tests hold the server to."""
import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

failures = 0


def check(cond, what):
    """Prints ok/FAIL for one assertion and counts the failures; finish() turns the count into the exit status."""
    global failures
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures += 1


def finish():
    """Prints the failure count; returns the test's exit status (1 when any check failed)."""
    print(f"{failures} failure(s)", flush=True)
    return 1 if failures else 0


@contextlib.contextmanager
def needs(what):
    """`with needs("numpy and tritonclient[all]"):` around a test's imports: any of them failing skips the
    test (exit 77, meson's skip) saying what it needs."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - any import failure means the same: skip
        print(f"skipped: needs {what}: {e}", flush=True)
        sys.exit(77)


def start(ringside, args, env=None):
    """Runs `ringside serve ARGS` (with os.environ plus ENV) and waits for its banner. Returns (process, ports,
    banner text), ports a dict with "http", "grpc" and "metrics" for those the server opened; the caller
    stops the process. Exits the test with the server's output when it ends without a banner."""
    full_env = dict(os.environ, **env) if env else None
    p = subprocess.Popen([ringside, "serve"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=full_env)
    lines = []
    for line in p.stdout:
        lines.append(line)
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:
            ports = {"http": int(m.group(1))}
            g = re.search(r"gRPC on 127\.0\.0\.1:(\d+)", line)
            if g:
                ports["grpc"] = int(g.group(1))
            mm = re.search(r"metrics on http://127\.0\.0\.1:(\d+)", line)
            if mm:
                ports["metrics"] = int(mm.group(1))
            return p, ports, "".join(lines)
    raise SystemExit("server did not start: " + "".join(lines) + p.stderr.read())


def repo_args(repo, grpc=True, metrics=False):
    """The command line serving REPO on ephemeral loopback ports; grpc/metrics False leave that port closed."""
    return ["--repo", repo, "--http", "0", "--grpc", "0" if grpc else "-1", "--metrics", "0" if metrics else "-1"]


def stop(p, timeout=60):
    """SIGTERM, as an operator stops the server; returns its exit status."""
    p.send_signal(signal.SIGTERM)
    return p.wait(timeout=timeout)


@contextlib.contextmanager
def serving(ringside, repo, *extra, grpc=True, metrics=False, env=None):
    """`with serving(...) as (p, ports, banner):` the server on REPO for the block, stopped (SIGTERM) after it
    however the block ends."""
    p, ports, banner = start(ringside, repo_args(repo, grpc, metrics) + list(extra), env)
    try:
        yield p, ports, banner
    finally:
        if p.poll() is None:
            stop(p)


def main_on_repo(ringside, make_repo, run, grpc=True, env=None):
    """A test's whole main: MAKE_REPO(root) writes a temporary repository, the server serves it (ENV's values
    formatted with {root}, so a file such as RINGSIDE_SERVE_TRACE's lies in it), RUN(root, ports, process)
    checks it; exits with the tally."""
    with tempfile.TemporaryDirectory() as root:
        make_repo(root)
        env = {k: v.format(root=root) for k, v in env.items()} if env else None
        with serving(ringside, root, grpc=grpc, env=env) as (p, ports, _):
            run(root, ports, p)
    sys.exit(finish())


def write_config(repo, name, text):
    """REPO/NAME/config.pbtxt holding TEXT (the model folder made when missing)."""
    os.makedirs(os.path.join(repo, name), exist_ok=True)
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(text)


def write_onnx(repo, name, config, model, fname="model.onnx", version=1):
    """REPO/NAME/VERSION/FNAME from an onnx ModelProto, and REPO/NAME/config.pbtxt holding CONFIG."""
    import onnx  # only the tests writing ONNX by hand need it
    os.makedirs(os.path.join(repo, name, str(version)), exist_ok=True)
    onnx.save(model, os.path.join(repo, name, str(version), fname))
    write_config(repo, name, config)


def export_mlp(ringside, repo, name, config, spec="4-16-3"):
    """REPO/NAME/1/model.onnx: ringside's MLP SPEC (seed 3) exported, and its config.pbtxt holding CONFIG."""
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    subprocess.run([ringside, "--no-db", "-c", f"model m = mlp {spec} seed=3; export m {repo}/{name}/1/model.onnx"],
                   check=True, stdout=subprocess.DEVNULL)
    write_config(repo, name, config)


def request(port, method, path, body=None, timeout=60):
    """One HTTP request on its own connection; BODY a str or bytes is sent as it is, anything else as JSON.
    Returns (status, bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if body is None or isinstance(body, (str, bytes)) else json.dumps(body)
    c.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, out


def metrics(port, timeout=60):
    """The metrics port's samples: {'name{labels}': value}."""
    _, data = request(port, "GET", "/metrics", timeout=timeout)
    out = {}
    for line in data.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, val = line.rsplit(" ", 1)
        out[key] = float(val)
    return out


def proc_status(pid, key):
    """A number from /proc/PID/status (VmHWM and VmRSS in KiB, Threads); exits the test when KEY is absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise SystemExit(f"no {key} in /proc/{pid}/status")


def wait_for(cond, within, step=0.1):
    """Polls COND until it holds (True) or WITHIN seconds pass (False)."""
    t = time.time() + within
    while time.time() < t:
        if cond():
            return True
        time.sleep(step)
    return False


def triton_clients(ports, http_concurrency=1):
    """tritonclient's HTTP and gRPC clients on the server's ports."""
    import tritonclient.grpc as tg
    import tritonclient.http as th
    return (th.InferenceServerClient(f"127.0.0.1:{ports['http']}", concurrency=http_concurrency),
            tg.InferenceServerClient(f"127.0.0.1:{ports['grpc']}"))


def rank_pids(server_pid):
    """The rank processes the server started and that still live: its children running `--worker serve`,
    zombies left out; sorted."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if int(st[1]) == server_pid and st[0] != "Z" and b"--worker" in cmd and b"serve" in cmd:
            out.append(int(d))
    return sorted(out)


def gone(pids, within=10.0):
    """True once none of PIDS lives (ended or a zombie) within WITHIN seconds."""
    def alive(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    return wait_for(lambda: not any(alive(p) for p in pids), within)
