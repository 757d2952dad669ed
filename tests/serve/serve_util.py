"""What the Python serve tests share: starting `ringside serve` and reading its ports off the banner."""
import re
import subprocess


def start(ringside, args):
    """Runs `ringside serve ARGS` and waits for its banner. Returns (process, ports, banner text), ports
    a dict with "http", "grpc" and "metrics" for those the server opened; the caller stops the process.
    Exits the test with the server's output when it ends without a banner."""
    p = subprocess.Popen([ringside, "serve"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
