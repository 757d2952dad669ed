"""What an int8 plan's `plan show` and compile report must say (issue 26), for test_patterns.py and
export_torchvision.py: the text run-plan-onnx prints.

  int8_report.check(tag, text, forced) -> list of failures

- Every line of the report that times a node's int8 kernel against fp32 ("conv 5: int8 (0.36 ms) over
  fp32 (1.80 ms) at batch 16 ...") names the precision the plan then runs that node in, and the kept
  one is the faster of the two times it prints (compile keeps int8 only where it pays).
- A convolution that sums into a residual (+sum) runs int8 on a kernel that is not oneDNN's reference
  one (ref_int8:any) on every ISA where oneDNN has int8 convolutions (AVX2 and up: jit_uni_int8,
  brgconv), when every node was asked to be int8 (forced); when timed, it is int8 on such a kernel or
  fp32 with a report line saying fp32 was faster. Depthwise and image convolutions (fewer than 4 input
  channels a group) stay fp32 by rule: they are left out.
"""
import re

NODE = re.compile(r"^\s*(\d+)\s+(\S+)\s+(\w+)\s+(\S+).*?\s(fp32|bf16|int8)\s+(.*?)\s+(\S+)\s*$")
TIMED = re.compile(r"^report: (\w+) (\S+): (int8|fp32) \(([\d.]+) ms\) over (int8|fp32) \(([\d.]+) ms\)")
ISA = re.compile(r"oneDNN [\d.]+, (\w+)\)")


def nodes(text):
    """name -> (kind, precision, post-ops, kernel) of `plan show`'s node lines (kind as it shows it:
    conv, dwconv, gconv, linear, ...; the report says conv for all three)."""
    out = {}
    for line in text.splitlines():
        m = NODE.match(line)
        if m and not line.lstrip().startswith("value"):
            out[m.group(2)] = (m.group(3), m.group(5), m.group(6), m.group(7))
    return out


def check(tag, text, forced):
    fails = []
    shown = nodes(text)
    isa = ISA.search(text)
    isa = isa.group(1) if isa else "?"
    timed = {}
    for line in text.splitlines():
        m = TIMED.match(line)
        if not m:
            continue
        key, kept, t_kept, t_other = m.group(2), m.group(3), float(m.group(4)), float(m.group(6))
        timed[key] = kept
        if key not in shown or shown[key][1] != kept:
            fails.append(f"{tag}: the report keeps {kept} for node {key} but the plan runs it as {shown.get(key)}")
        if t_kept > t_other:
            fails.append(f"{tag}: {key} kept {kept} at {t_kept} ms over {t_other} ms: {line}")
    if forced and timed:
        fails.append(f"{tag}: int8 on every node was asked for, yet the report timed {sorted(timed)}")
    if isa in ("?", "sse41", "avx"):
        return fails  # no int8 convolution kernels of oneDNN's there to expect
    for name, (kind, prec, posts, kernel) in shown.items():
        if "conv" not in kind or "+sum" not in posts:
            continue
        if prec == "int8" and kernel.startswith("ref"):
            fails.append(f"{tag}: residual conv {name} runs int8 on oneDNN's reference kernel {kernel} ({isa})")
        elif prec != "int8" and (forced or timed.get(name) != "fp32"):
            fails.append(f"{tag}: residual conv {name} stays {prec} on {isa} without a report line timing it slower")
    return fails
