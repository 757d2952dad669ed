#!/usr/bin/env python3
"""`ringside serve` under hostile clients on the loopback, with its limits lowered so the test is short
(--per-ip 64 --request-timeout 2 --idle 5 --max-entries 1024):

- HTTP: 80 connections from each of 127.0.0.2..5 that trickle a request's headers a byte at a time,
  and 40 silent ones from 127.0.0.6. A normal client (127.0.0.1) gets every answer meanwhile; each
  address beyond 64 is refused at once (counted per_ip); every held connection is closed by the
  server within the request deadline however it trickles (counted request_timeout).
- gRPC: 100 idle connections from 127.0.0.7: 64 held, 36 refused; the server holds no more than one
  thread per idle connection (/proc/PID/status Threads), none once they have parked, and closes them
  after --idle (counted idle).
- The protobuf bomb: a ModelInferRequest of 2M empty `inputs` entries (4 MiB) is refused naming the
  numbers, and the server's peak RSS (/proc/PID/status VmHWM) rises by less than 4x the message.
- A model name with an embedded NUL ("mlp\\0x") is refused, not read as "mlp".
- A unary gRPC call whose request trickles in is reset at the request deadline (counted).

usage: test_limits.py build/repl/ringside
"""
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

import grpc
import serve_util  # noqa: E402 - beside this file

RINGSIDE = sys.argv[1]
check = serve_util.check
PER_IP, REQ_S, IDLE_S = 64, 2, 5


def refused(mt, proto, reason):
    return mt.get(f'ringside_refused_connections_total{{protocol="{proto}",reason="{reason}"}}', -1)


def connect_from(src, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def closed_by_server(s, timeout):
    """True when the server ends the connection (EOF or reset) within timeout seconds."""
    s.settimeout(timeout)
    end = time.time() + timeout
    try:
        while time.time() < end:
            if not s.recv(4096):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def pb_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb_str(field, s):
    return pb_varint(field << 3 | 2) + pb_varint(len(s)) + s


def h2_frame(ftype, flags, sid, payload):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload


def h2_frames(data):
    """(type, stream id) of each whole HTTP/2 frame in data."""
    out, i = [], 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i:i + 3], "big")
        out.append((data[i + 3], int.from_bytes(data[i + 5:i + 9], "big") & 0x7FFFFFFF))
        i += 9 + n
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="ringside-limits-")
    repo = os.path.join(tmp, "repo")
    serve_util.export_mlp(RINGSIDE, repo, "mlp", "max_batch_size: 8\n")
    p, ports, _ = serve_util.start(RINGSIDE, serve_util.repo_args(repo, metrics=True) + [
        "--per-ip", str(PER_IP), "--request-timeout", str(REQ_S), "--idle", str(IDLE_S), "--max-entries", "1024"])
    held = []
    try:
        port, gport, mport = ports["http"], ports.get("grpc"), ports.get("metrics")
        check(gport is not None and mport is not None, "the server started with the limits given")
        if gport is None or mport is None:
            return 1
        body = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
        check(serve_util.request(port, "POST", "/v2/models/mlp/infer", body)[0] == 200, "a normal request is answered")

        # ---- the protobuf bomb, first, so the peak RSS it would raise is not hidden by what follows ----
        ch = grpc.insecure_channel(f"127.0.0.1:{gport}")
        infer = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        ready = ch.unary_unary("/inference.GRPCInferenceService/ModelReady")
        n_entries = 2 << 20
        bomb = pb_str(1, b"mlp") + b"\x2a\x00" * n_entries
        hwm0 = serve_util.proc_status(p.pid, "VmHWM")
        try:
            infer(bomb, timeout=60)
            code, detail = grpc.StatusCode.OK, ""
        except grpc.RpcError as e:
            code, detail = e.code(), e.details()
        hwm1 = serve_util.proc_status(p.pid, "VmHWM")
        check(code == grpc.StatusCode.RESOURCE_EXHAUSTED and str(n_entries) in detail and "1024" in detail,
              f"{n_entries} empty inputs entries refused naming the numbers: {code} '{detail}'")
        grew = (hwm1 - hwm0) * 1024
        # under AddressSanitizer every block carries redzones and shadow, and freed ones wait in its
        # quarantine: the bound is the 4x for a plain build, 8x there (unpacking would cost ~60x)
        with open(f"/proc/{p.pid}/maps") as f:
            factor = 8 if "libasan" in f.read() else 4
        check(grew < factor * len(bomb), f"peak RSS rose by {grew / 2**20:.1f} MiB for a {len(bomb) / 2**20:.1f} MiB "
              f"message (under {factor}x)")
        # ModelReadyRequest { name = "mlp\0x" }
        try:
            r = ready(pb_str(1, b"mlp\x00x"), timeout=20)
            code, detail = grpc.StatusCode.OK, repr(r)
        except grpc.RpcError as e:
            code, detail = e.code(), e.details()
        check(code == grpc.StatusCode.INVALID_ARGUMENT and "NUL" in detail,
              f"a model name with an embedded NUL is refused, not read as 'mlp': {code} '{detail}'")
        ch.close()

        # ---- HTTP: trickling and silent connections ----
        srcs = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
        trick = []
        for src in srcs:
            for _ in range(PER_IP + 16):
                s = connect_from(src, port)
                trick.append(s)
        silent = [connect_from("127.0.0.6", port) for _ in range(40)]
        held += trick + silent
        stop = threading.Event()
        req = b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 400

        def trickle():
            i = 0
            while not stop.is_set() and i < len(req):
                for s in trick:
                    try:
                        s.send(req[i:i + 1])
                    except OSError:
                        pass
                i += 1
                stop.wait(0.2)
        t = threading.Thread(target=trickle)
        t.start()
        t0 = time.time()
        codes = [serve_util.request(port, "POST", "/v2/models/mlp/infer", body)[0] for _ in range(30)]
        check(all(c == 200 for c in codes), f"a normal client gets all 30 answers while {len(trick)} connections "
              f"trickle and {len(silent)} sit silent")
        time.sleep(0.5)
        mt = serve_util.metrics(mport)
        check(refused(mt, "http", "per_ip") == 16 * len(srcs),
              f"HTTP: {16 * len(srcs)} connections past --per-ip {PER_IP} refused "
              f"(counted {refused(mt, 'http', 'per_ip'):.0f})")
        wait = max(0.1, t0 + REQ_S + 3 - time.time())
        ended = sum(closed_by_server(s, wait) for s in trick + silent)
        stop.set()
        t.join()
        check(ended == len(trick) + len(silent),
              f"the server closed {ended} of {len(trick) + len(silent)} trickling and silent connections within the "
              f"{REQ_S} s request deadline (bytes kept coming every 0.2 s)")
        mt = serve_util.metrics(mport)
        n_held = PER_IP * len(srcs) + len(silent)
        check(refused(mt, "http", "request_timeout") >= n_held,
              f"counted as request_timeout: {refused(mt, 'http', 'request_timeout'):.0f} (>= {n_held})")
        for s in held:
            s.close()
        held = []

        # ---- gRPC: idle connections ----
        threads0 = serve_util.proc_status(p.pid, "Threads")
        g = [connect_from("127.0.0.7", gport) for _ in range(100)]
        held += g
        time.sleep(0.5)
        mt = serve_util.metrics(mport)
        threads1 = serve_util.proc_status(p.pid, "Threads")
        check(refused(mt, "grpc", "per_ip") == 100 - PER_IP and
              mt.get('ringside_open_connections{protocol="grpc"}') == PER_IP,
              f"gRPC: {PER_IP} of 100 idle connections held, {100 - PER_IP} refused "
              f"({refused(mt, 'grpc', 'per_ip'):.0f} counted)")
        check(threads1 - threads0 <= PER_IP + 4,
              f"{PER_IP} idle gRPC connections cost {threads1 - threads0} threads (at most one each)")
        parked = False
        for _ in range(int((IDLE_S - 1) / 0.1)):
            if serve_util.proc_status(p.pid, "Threads") - threads0 <= 4:
                parked = True
                break
            time.sleep(0.1)
        check(parked, f"after a second with nothing to do they hold no thread: they wait in an epoll set "
              f"({serve_util.proc_status(p.pid, 'Threads') - threads0} threads above the start)")
        ended = sum(closed_by_server(s, IDLE_S + 3) for s in g)
        check(ended == len(g), f"all {len(g)} idle gRPC connections closed after --idle {IDLE_S} s ({ended})")
        mt = serve_util.metrics(mport)
        check(refused(mt, "grpc", "idle") == PER_IP and refused(mt, "grpc", "max_entries") == 1 and
              refused(mt, "grpc", "bad_name") == 1,
              "gRPC refusals counted: idle, max_entries (the bomb), bad_name (the NUL)")
        # a unary gRPC call whose request trickles: reset at the deadline (raw HTTP/2, HPACK literals)
        h = connect_from("127.0.0.8", gport)
        held.append(h)
        hdr = b"".join(b"\x00" + bytes([len(k)]) + k + bytes([len(v)]) + v for k, v in (
            (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/inference.GRPCInferenceService/ModelInfer"),
            (b":authority", b"x"), (b"content-type", b"application/grpc"), (b"te", b"trailers")))
        h.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b"") + h2_frame(1, 4, 1, hdr))
        h.settimeout(0.3)
        got, reset, t0 = b"", False, time.time()
        msg = b"\x00\x00\x00\x01\x00" + b"\x0a" * 256
        i = 0
        while time.time() < t0 + REQ_S + 4 and not reset:
            try:
                h.sendall(h2_frame(0, 0, 1, msg[i:i + 1]))
                i += 1
                got += h.recv(65536)
            except socket.timeout:
                pass
            except OSError:
                break
            reset = any(t == 3 and sid == 1 for t, sid in h2_frames(got))
        mt = serve_util.metrics(mport)
        check(reset and refused(mt, "grpc", "request_timeout") == 1,
              f"a unary gRPC request trickled a byte each 0.3 s is reset at the {REQ_S} s deadline "
              f"(RST_STREAM seen: {reset}; counted {refused(mt, 'grpc', 'request_timeout'):.0f})")
        check(serve_util.request(port, "POST", "/v2/models/mlp/infer", body)[0] == 200, "the server still answers")
    finally:
        for s in held:
            s.close()
        serve_util.stop(p)
    shutil.rmtree(tmp, ignore_errors=True)
    return serve_util.finish()


if __name__ == "__main__":
    sys.exit(main())
