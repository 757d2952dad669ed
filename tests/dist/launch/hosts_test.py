#!/usr/bin/env python3
"""Ranks on two "hosts" of one machine: two network namespaces joined by a veth pair, each with its
own address and host name, a DeepSpeed hostfile naming them, and an rsh agent that runs a command in
the namespace holding an address (Open MPI's OMPI_MCA_plm_rsh_agent, what ssh is between machines).
The REPL runs on the first host; `hostfile=` makes mpirun start 2 ranks on each.
  - `world`: ranks 2 and 3 are local ranks 0 and 1 of a second node (mpirun's own numbering);
  - `collective all_reduce`: every rank holds the sum;
  - `train mode=ddp` and `mode=fsdp zero=3` on 2 hosts x 2 ranks end with the weights one process reaches;
  - a hostfile that DeepSpeed refuses, and hostfile= with backend=shm, are refused before any rank.
The namespaces, the veth pair and the agent are made here and removed at the end. Skipped (77) with
the reason where they cannot be made: no CAP_NET_ADMIN, no `ip` or `unshare`, no mpirun or no mpi backend
(all but `tcp`).

`tcp` (second argument): backend=tcp ranks started through the rsh agent with torchrun's variables, rank 0's
host running the store: world, all_reduce (and the session log's events of every rank), ddp and fsdp
zero=3 equal to one process. `launch`: `ringside launch` with
DeepSpeed's options runs a script on the hosts. `bench` (by hand): all_reduce busbw across the two hosts
and on one, tcp and mpi.

usage: hosts_test.py RINGSIDE [tcp | launch | bench]"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

EXE = os.path.abspath(sys.argv[1])
failures = 0
TAG = "rs%d" % (os.getpid() % 100000)
NS = [TAG + "a", TAG + "b"]
NET = "10.213.%d" % (os.getpid() % 200 + 10)
ADDR = [NET + ".1", NET + ".2"]


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
    else:
        print("ok:", what)


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def sh(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def make_hosts(mpi):
    for tool in ("ip", "unshare") + (("mpirun",) if mpi else ()):
        if not shutil.which(tool):
            skip("`%s` is not installed" % tool)
    if mpi and "  mpi " not in sh(EXE, "--no-db", "-c", "backends").stdout:
        skip("this build has no mpi backend (meson did not find Open MPI)")
    p = sh("ip", "netns", "add", NS[0])
    if p.returncode:
        skip("cannot make a network namespace (needs CAP_NET_ADMIN): " + p.stderr.strip())
    steps = [("ip", "netns", "add", NS[1]),
             ("ip", "link", "add", TAG + "x", "type", "veth", "peer", "name", TAG + "y"),
             ("ip", "link", "set", TAG + "x", "netns", NS[0]), ("ip", "link", "set", TAG + "y", "netns", NS[1]),
             ("ip", "-n", NS[0], "addr", "add", ADDR[0] + "/24", "dev", TAG + "x"),
             ("ip", "-n", NS[1], "addr", "add", ADDR[1] + "/24", "dev", TAG + "y")]
    for ns, dev in ((NS[0], TAG + "x"), (NS[1], TAG + "y")):
        steps += [("ip", "-n", ns, "link", "set", dev, "up"), ("ip", "-n", ns, "link", "set", "lo", "up")]
    for s in steps:
        p = sh(*s)
        if p.returncode:
            remove_hosts()
            skip("%s: %s" % (" ".join(s), p.stderr.strip()))


def remove_hosts():
    for ns in NS:  # removing a namespace removes its end of the veth pair, and the pair with it
        sh("ip", "netns", "del", ns)


def agent(tmp):
    """The rsh agent: AGENT HOST CMD... runs CMD in HOST's namespace under HOST's own host name."""
    path = os.path.join(tmp, "agent.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nhost=$1; shift\ncase \"$host\" in\n")
        for i in range(2):
            f.write("  %s) ns=%s; hn=%s;;\n" % (ADDR[i], NS[i], "host%d" % i))
        f.write("  *) echo \"agent: unknown host $host\" >&2; exit 255;;\nesac\n"
                "exec ip netns exec \"$ns\" unshare --uts sh -c \"hostname $hn; $*\"\n")
    os.chmod(path, 0o755)
    return path


def on_host0(tmp, cmds, timeout=240, launch=None, db=None):
    """cmds run by the REPL on host 0 (-c), or, with launch (its options), the script cmds by `ringside launch`."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", COLUMNS="1000",
               OMPI_MCA_plm_rsh_agent=agent(tmp), RINGSIDE_RSH_AGENT=agent(tmp), OMPI_MCA_btl_tcp_if_include=NET + ".0/24",
               OMPI_MCA_oob_tcp_if_include=NET + ".0/24", ASAN_OPTIONS="detect_leaks=0")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    if launch is None:
        inner = "hostname host0; exec %s %s --keep-going -c %s" % (EXE, "--db " + shlex_quote(db) if db else "--no-db",
                                                                  shlex_quote(cmds))
    else:
        script = os.path.join(tmp, "launched.ring")
        with open(script, "w") as f:
            f.write(cmds.replace("; ", "\n") + "\n")
        inner = "hostname host0; exec %s --no-db launch %s %s" % (EXE, " ".join(map(shlex_quote, launch)), script)
    p = subprocess.run(["ip", "netns", "exec", NS[0], "unshare", "--uts", "sh", "-c", inner], capture_output=True,
                       text=True, timeout=timeout, env=env, cwd=tmp)
    return p.returncode, p.stdout + p.stderr


def shlex_quote(s):
    import shlex
    return shlex.quote(s)


def load(path):
    """safetensors' tensors as flat float lists (the format's header and raw f32 data)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        import json
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = struct.unpack("<%df" % ((b - a) // 4), data[a:b])
    return out


def main(tmp):
    hf = os.path.join(tmp, "hostfile")
    with open(hf, "w") as f:
        f.write("# two namespaces, DeepSpeed's format\n%s slots=2\n%s slots=2\n" % (ADDR[0], ADDR[1]))
    rc, out = on_host0(tmp, "world ranks=4 backend=mpi hostfile=%s" % hf)
    print(out)
    check(rc == 0, "world on 2 hosts x 2 ranks runs")
    check(re.search(r"rank 2: OMPI_COMM_WORLD_RANK=2 _SIZE=4 _LOCAL_RANK=0 _LOCAL_SIZE=2", out) is not None and
          re.search(r"rank 3: OMPI_COMM_WORLD_RANK=3 _SIZE=4 _LOCAL_RANK=1 _LOCAL_SIZE=2", out) is not None,
          "ranks 2 and 3 are local ranks 0 and 1 of the second host")
    check("on hosts %s:2,%s:2" % (ADDR[0], ADDR[1]) in out, "the summary names the hosts")

    rc, out = on_host0(tmp, "collective all_reduce ranks=4 backend=mpi count=3 hostfile=%s" % hf)
    print(out)
    check(rc == 0 and out.count("-> out [10, 46, 82]") == 4, "all_reduce across the hosts: every rank holds the sum")

    for mode in ("mode=ddp", "mode=fsdp zero=3"):
        a, b = os.path.join(tmp, "a.safetensors"), os.path.join(tmp, "b.safetensors")
        for f in (a, b):
            if os.path.exists(f):
                os.unlink(f)
        rc, out = on_host0(tmp, "data d = digits n=1000 seed=1; model m = mlp 784-16-10 seed=1; "
                                "model r = mlp 784-16-10 seed=1; train m on d %s ranks=4 backend=mpi hostfile=%s "
                                "batch=32 steps=8 eval=off view=off; save m %s; train r on d batch=32 steps=8 eval=off; "
                                "save r %s" % (mode, hf, a, b))
        print(out)
        check(rc == 0, "%s on 2 hosts x 2 ranks trains" % mode)
        if os.path.exists(a) and os.path.exists(b):
            wa, wb = load(a), load(b)
            worst = max(abs(x - y) / (abs(y) + 1e-3) for k in wb for x, y in zip(wa[k], wb[k]))
            check(wa.keys() == wb.keys() and worst < 1e-4,
                  "%s across hosts ends with one process's weights (%.2g)" % (mode, worst))

    bad = os.path.join(tmp, "bad")
    with open(bad, "w") as f:
        f.write("%s slots=2\n%s slots=2\n" % (ADDR[0], ADDR[0]))
    rc, out = on_host0(tmp, "collective all_reduce ranks=4 backend=mpi hostfile=%s; "
                            "collective all_reduce ranks=4 backend=shm hostfile=%s; "
                            "collective all_reduce ranks=8 backend=mpi hostfile=%s" % (bad, hf, hf))
    print(out)
    check("Hostfile contains multiple entries for %s" % ADDR[0] in out, "DeepSpeed's refusal of a host given twice")
    check("backend=shm cannot join" in out, "hostfile= with shm is refused")
    check("8 ranks do not fit in the hostfile's 4 slots" in out, "more ranks than slots are refused")
    check("rank 0:" not in out, "and no rank started")


def over_tcp(tmp, hf):
    """backend=tcp without mpirun: each rank started through the rsh agent (what ssh is between machines)
    with torchrun's variables on its command line, rank 0's host running the store."""
    rc, out = on_host0(tmp, "world ranks=4 backend=tcp hostfile=%s" % hf)
    print(out)
    check(rc == 0 and "every rank counted 4" in out, "world over tcp on 2 hosts x 2 ranks: every rank joined")
    check(re.search(r"rank 2: RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2", out) is not None and
          re.search(r"rank 3: RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2", out) is not None and
          "they met at MASTER_ADDR=%s MASTER_PORT=" % ADDR[0] in out,
          "ranks 2 and 3 are local ranks 0 and 1 of the second host; MASTER_ADDR is rank 0's host")
    db = os.path.join(tmp, "s.db")
    rc, out = on_host0(tmp, "collective all_reduce ranks=4 backend=tcp count=3 hostfile=%s" % hf, db=db)
    print(out)
    check(rc == 0 and out.count("-> out [10, 46, 82]") == 4, "all_reduce over tcp across the hosts: every rank holds the sum")
    import sqlite3
    con = sqlite3.connect(db)
    ends = con.execute("SELECT rank, count(*) FROM events WHERE kind = 'coll_end' GROUP BY rank").fetchall()
    status = con.execute("SELECT status FROM runs").fetchall()
    con.close()
    check(sorted(r for r, _ in ends) == [0, 1, 2, 3] and status == [("done",)],
          "the session log has every rank's collective, the remote ones as local ones: %s %s" % (ends, status))
    for i, mode in enumerate(("mode=ddp", "mode=fsdp zero=3")):
        a, b = os.path.join(tmp, "ta%d.safetensors" % i), os.path.join(tmp, "tb%d.safetensors" % i)
        rc, out = on_host0(tmp, "data d = digits n=1000 seed=1; model m = mlp 784-16-10 seed=1; "
                                "model r = mlp 784-16-10 seed=1; train m on d %s ranks=4 backend=tcp hostfile=%s "
                                "batch=32 steps=8 eval=off view=off; save m %s; train r on d batch=32 steps=8 eval=off; "
                                "save r %s" % (mode, hf, a, b))
        print(out)
        check(rc == 0, "%s over tcp on 2 hosts x 2 ranks trains" % mode)
        if os.path.exists(a) and os.path.exists(b):
            wa, wb = load(a), load(b)
            worst = max(abs(x - y) / (abs(y) + 1e-3) for k in wb for x, y in zip(wa[k], wb[k]))
            check(wa.keys() == wb.keys() and worst < 1e-4,
                  "%s over tcp across hosts ends with one process's weights (%.2g)" % (mode, worst))
    rc, out = on_host0(tmp, "collective all_reduce ranks=4 backend=shm hostfile=%s" % hf)
    check("backend=shm cannot join" in out and "rank 0:" not in out, "hostfile= with shm is refused before any rank")
    store_port_busy(tmp)


def store_port_busy(tmp):
    """The store's port is picked free on the REPL's host (host 0), but the store runs on rank 0's host: with
    host 1 first in the hostfile and both ports host 0 may pick (its ephemeral range narrowed to two) taken on
    host 1, rank 0 cannot bind. The start fails naming host 1, its address and port and the reason, and no
    other rank is started (none of their lines, no rendezvous wait)."""
    hf = os.path.join(tmp, "hostfile-b-first")
    with open(hf, "w") as f:
        f.write("%s slots=2\n%s slots=2\n" % (ADDR[1], ADDR[0]))
    ports = (41000, 41001)
    p = sh("ip", "netns", "exec", NS[0], "sysctl", "-w", "net.ipv4.ip_local_port_range=%d %d" % ports)
    if p.returncode:
        print("SKIP store_port_busy: cannot narrow host 0's port range: " + p.stderr.strip())
        return
    holder = subprocess.Popen(["ip", "netns", "exec", NS[1], sys.executable, "-c",
                               "import socket, sys, time\nss = []\nfor p in %r:\n    s = socket.socket()\n"
                               "    s.bind(('0.0.0.0', p))\n    s.listen()\n    ss.append(s)\nprint('held', flush=True)\n"
                               "time.sleep(300)" % (ports,)], stdout=subprocess.PIPE, text=True)
    try:
        check(holder.stdout.readline().strip() == "held", "host 1 holds ports %s" % (ports,))
        rc, out = on_host0(tmp, "collective all_reduce ranks=4 backend=tcp hostfile=%s timeout=20s" % hf, timeout=60)
        print(out)
        m = re.search(r"rank 0 on %s could not host the rendezvous store at %s:(\d+) \((.*)\); no other rank was "
                      r"started" % (re.escape(ADDR[1]), re.escape(ADDR[1])), out)
        check(rc != 0 and m is not None and int(m.group(1)) in ports and "in use" in m.group(2),
              "a store port busy on rank 0's host is reported naming the host, address, port and reason")
        check(not re.search(r"^rank [123]\b", out, re.M) and "rendezvous:" not in out,
              "and no other rank was started")
    finally:
        holder.kill()
        holder.wait()
        sh("ip", "netns", "exec", NS[0], "sysctl", "-w", "net.ipv4.ip_local_port_range=32768 60999")


def bench(tmp, hf):
    """By hand, not CI: all_reduce busbw on 2 namespace hosts x 2 ranks (tcp through the agent, mpi through
    mpirun) beside the same 4 ranks on host 0 alone, interleaved, as `bench`'s own table."""
    sizes = os.environ.get("SIZES", "1K..16M")
    for rnd in range(int(os.environ.get("ROUNDS", "2"))):
        for be in ("tcp", "mpi"):
            for where in ("one host", "two hosts"):
                extra = " hostfile=%s" % hf if where == "two hosts" else ""
                rc, out = on_host0(tmp, "bench all_reduce ranks=4 backend=%s sizes=%s view=off%s" % (be, sizes, extra))
                print("== round %d: %s, %s (rc %d)\n%s" % (rnd, be, where, rc, out))


def launched(tmp, hf):
    """`ringside launch` as DeepSpeed's launcher: the hostfile's hosts, narrowed by --num_procs, --include
    and --exclude, are the script's default for rank-starting commands (ranks= their slots, backend=mpi)."""
    rc, out = on_host0(tmp, "world", launch=["--hostfile", hf])
    print(out)
    check(rc == 0 and "on hosts %s:2,%s:2" % (ADDR[0], ADDR[1]) in out and
          re.search(r"rank 3: OMPI_COMM_WORLD_RANK=3 _SIZE=4 _LOCAL_RANK=1 _LOCAL_SIZE=2", out) is not None,
          "launch --hostfile: a script's `world` runs a rank a slot on both hosts")
    for opts, hosts in ((["--include", ADDR[1]], "%s:2" % ADDR[1]), (["--exclude", "%s:1" % ADDR[0]],
                        "%s:1,%s:2" % (ADDR[0], ADDR[1])), (["--num_nodes", "1"], "%s:2" % ADDR[0])):
        rc, out = on_host0(tmp, "world", launch=["--hostfile", hf] + opts)
        print(out)
        check(rc == 0 and "on hosts %s" % hosts in out, "launch %s: the ranks run on %s" % (" ".join(opts), hosts))
    a, b = os.path.join(tmp, "la.safetensors"), os.path.join(tmp, "lb.safetensors")
    rc, out = on_host0(tmp, "data d = digits n=1000 seed=1; model m = mlp 784-16-10 seed=1; "
                            "model r = mlp 784-16-10 seed=1; train m on d mode=ddp batch=32 steps=8 eval=off view=off; "
                            "save m %s; train r on d batch=32 steps=8 eval=off; save r %s" % (a, b),
                       launch=["--hostfile", hf, "--num_procs", "1"])
    print(out)
    check(rc == 0 and "2 ranks on `ringside launch`'s hosts %s:1,%s:1" % (ADDR[0], ADDR[1]) in out,
          "launch --num_procs 1: a script's ddp training runs one rank on each host")
    if os.path.exists(a) and os.path.exists(b):
        wa, wb = load(a), load(b)
        worst = max(abs(x - y) / (abs(y) + 1e-3) for k in wb for x, y in zip(wa[k], wb[k]))
        check(wa.keys() == wb.keys() and worst < 1e-4, "the launched ddp ends with one process's weights (%.2g)" % worst)
    rc, out = on_host0(tmp, "world", launch=["--hostfile", hf, "--include", ADDR[0], "--num_nodes", "1"])
    check(rc == 2 and "Cannot specify num_nodes/gpus with include/exclude" in out and "rank 0" not in out,
          "DeepSpeed's refusal of --num_nodes with --include, before any rank: " + out.strip())
    rc, out = on_host0(tmp, "world", launch=["--hostfile", hf, "--include", "%s:2" % ADDR[1]])
    check(rc == 2 and "No slot '2' specified on host '%s'" % ADDR[1] in out, "a slot the host lacks is refused")


MODE = sys.argv[2] if len(sys.argv) > 2 else "mpi"
make_hosts(MODE != "tcp")  # tcp ranks need no Open MPI
try:
    with tempfile.TemporaryDirectory() as tmp:
        if MODE != "mpi":
            hf = os.path.join(tmp, "hostfile")
            with open(hf, "w") as f:
                f.write("%s slots=2\n%s slots=2\n" % (ADDR[0], ADDR[1]))
            {"launch": launched, "tcp": over_tcp, "bench": bench}[MODE](tmp, hf)
        else:
            main(tmp)
finally:
    remove_hosts()
print("%d failed" % failures)
sys.exit(1 if failures else 0)
