#!/usr/bin/env python3
"""The sequence batcher (direct) pins each live sequence to one instance, as Triton's direct scheduler does.
A sequence model with instance_group count 2 (Identity of INPUT and the control inputs) is served with
RINGSIDE_SERVE_TRACE, the server's line per batch run naming the instance and the sequence; through
tritonclient over HTTP and gRPC:
- 6 sequences started one after another go to the instance with the fewest live sequences (0, 1, 0, 1, ...);
- then 4 more requests each, the 6 sequences at once from 6 threads: every request of a sequence ran on the
  instance its START went to (without the pin an idle instance takes any request), and the answers carry
  the sequence's own CORRID and INPUT;
- END frees the instance: after all ended, new sequences start at instance 0 again;
- max_sequence_idle_microseconds (200 ms here) frees it too: a sequence left idle for 0.6 s no longer
  counts (the next one goes to instance 0, not 1) and its next request is refused in Triton's words.

usage: test_triton_sequence_pin.py build/repl/ringside   (exits 77 without tritonclient or onnx)
"""
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import serve_util  # beside this file

with serve_util.needs("numpy, onnx and tritonclient[all]"):
    import numpy as np
    import onnx
    import tritonclient.grpc as tg
    import tritonclient.http as th
    from onnx import TensorProto, helper
    from tritonclient.utils import InferenceServerException


RINGSIDE = sys.argv[1]
TRACE = "trace.txt"  # in the repository folder
check = serve_util.check


def make_repo(root):
    ctl = [("INPUT", TensorProto.INT32), ("START", TensorProto.INT32), ("CORRID", TensorProto.UINT64)]
    g = helper.make_graph([helper.make_node("Identity", [n], ["O" + n]) for n, _ in ctl], "seq",
                          [helper.make_tensor_value_info(n, t, ["N", 1]) for n, t in ctl],
                          [helper.make_tensor_value_info("O" + n, t, ["N", 1]) for n, t in ctl])
    for name, idle in (("pin", 60000000), ("idle", 200000)):
        cfg = (f'name: "{name}"\nmax_batch_size: 4\ninstance_group [ {{ count: 2 kind: KIND_CPU }} ]\n'
               f'sequence_batching {{ direct {{ }} max_sequence_idle_microseconds: {idle} control_input [ '
               '{ name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }, '
               '{ name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] } ] }\n'
               'input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n')
        serve_util.write_onnx(root, name, cfg, helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def send(proto, ports, model, sid, value, **kw):
    mod = th if proto == "HTTP" else tg
    c = mod.InferenceServerClient(f"127.0.0.1:{ports['http' if proto == 'HTTP' else 'grpc']}")
    i = mod.InferInput("INPUT", [1, 1], "INT32")
    i.set_data_from_numpy(np.array([[value]], np.int32))
    r = c.infer(model, [i], sequence_id=sid, **kw)
    return int(r.as_numpy("OINPUT")[0, 0]), int(r.as_numpy("OCORRID")[0, 0])


def runs(trace, model):
    """(instance, sequence id) per batch run of model, in order."""
    out = []
    with open(trace) as f:
        for line in f:
            w = line.split()
            if len(w) == 8 and w[1] == model and w[7].startswith("u:"):
                out.append((int(w[3]), int(w[7][2:])))
    return out


def run(ports, trace):
    ids = [101, 102, 103, 104, 105, 106]
    protos = {sid: ("HTTP", "gRPC")[k % 2] for k, sid in enumerate(ids)}
    for sid in ids:
        send(protos[sid], ports, "pin", sid, 0, sequence_start=True)
    first = dict((s, i) for i, s in runs(trace, "pin"))
    check([first.get(s) for s in ids] == [0, 1, 0, 1, 0, 1],
          f"6 sequences started go to the least busy instance: {[first.get(s) for s in ids]}")

    def sequence(sid):
        got = [send(protos[sid], ports, "pin", sid, k, sequence_end=k == 4) for k in range(1, 5)]
        return got == [(k, sid) for k in range(1, 5)]

    with ThreadPoolExecutor(6) as ex:
        answers = list(ex.map(sequence, ids))
    check(all(answers), "each sequence's answers carry its INPUT and CORRID")
    per = {}
    for inst, sid in runs(trace, "pin"):
        per.setdefault(sid, []).append(inst)
    check(all(len(per.get(s, [])) == 5 and set(per[s]) == {first[s]} for s in ids),
          f"every request of a sequence ran on its instance: {per}")
    send("HTTP", ports, "pin", 201, 0, sequence_start=True)
    send("gRPC", ports, "pin", 202, 0, sequence_start=True)
    after = [i for i, s in runs(trace, "pin") if s in (201, 202)]
    check(after == [0, 1], f"END freed the instances: new sequences at 0, then 1: {after}")

    send("HTTP", ports, "idle", 301, 0, sequence_start=True)
    time.sleep(0.6)  # three times max_sequence_idle_microseconds
    send("gRPC", ports, "idle", 302, 0, sequence_start=True)
    at = [i for i, s in runs(trace, "idle")]
    check(at == [0, 0], f"a sequence idle past max_sequence_idle_microseconds frees its instance: {at}")
    try:
        send("HTTP", ports, "idle", 301, 1)
        check(False, "the idle sequence's next request refused")
    except InferenceServerException as e:
        check("must specify the START flag on the first request of the sequence" in str(e),
              f"the idle sequence's next request refused: {e}")


def main():
    serve_util.main_on_repo(RINGSIDE, make_repo, lambda root, ports, _: run(ports, os.path.join(root, TRACE)),
                            env={"RINGSIDE_SERVE_TRACE": os.path.join("{root}", TRACE)})


if __name__ == "__main__":
    main()
