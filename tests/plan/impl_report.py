"""What a plan's `plan show` and compile report must say of a grouped convolution's oneDNN kernel
(issue 26), for test_patterns.py and export_torchvision.py: the text run-plan-onnx prints.

  impl_report.check(tag, text) -> list of failures

Compile times the implementations oneDNN offers for a depthwise or grouped convolution and keeps
the fastest when it runs at least 5% faster than oneDNN's first (plan/dnnl_weights.c, pick_impl):

- each report line of that choice ("conv 2: kernel jit_dw:avx2 (1.6 ms) over brdgmm_dw:avx512_core (16 ms)
  at batch 64 ..." or "conv 2: kernel brdgmm_dw:avx512_core (0.54 ms), oneDNN's first, kept: the next,
  jit_dw:avx2 (0.52 ms), is not 5% faster ...") names a grouped conv that `plan show` runs on that kernel, in
  the compiled plan and in the plan saved and loaded back (the file keeps the choice);
- the kept kernel's time agrees with the rule (over: at least 5% faster; kept: the other not);
- no reference kernel (ref:any) is kept.

Which kernel wins is the machine's business: never checked.
"""
import re

import int8_report  # noqa: E402 (beside this file)

OVER = re.compile(r"^report: conv (\S+): kernel (\S+) \(([\d.]+) ms\) over (\S+) \(([\d.]+) ms\)")
KEPT = re.compile(r"^report: conv (\S+): kernel (\S+) \(([\d.]+) ms\), oneDNN's first, kept: the next, (\S+) \(([\d.]+) ms\)")


def check(tag, text):
    fails = []
    shown = int8_report.nodes(text)
    loaded = int8_report.nodes("\n".join(l[len("loaded| "):] for l in text.splitlines() if l.startswith("loaded| ")))
    if not loaded:
        fails.append(f"{tag}: run-plan-onnx printed no `loaded| ` lines (the loaded plan's `plan show`)")
    for line in text.splitlines():
        m, over = OVER.match(line), True
        if not m:
            m, over = KEPT.match(line), False
        if not m:
            continue
        name, kernel, t_kept, other, t_other = m.group(1), m.group(2), float(m.group(3)), m.group(4), float(m.group(5))
        for what, plan in (("compiled", shown), ("loaded", loaded)):
            got = plan.get(name)
            if not got or got[0] not in ("dwconv", "gconv"):
                fails.append(f"{tag}: the report chose a kernel for node {name}, which the {what} plan shows as {got}")
            elif got[3] != kernel and not (kernel.startswith(got[3]) and len(got[3]) >= 22):  # plan show cuts at 22
                fails.append(f"{tag}: the report keeps {kernel} for conv {name}; the {what} plan runs {got[3]}")
        if kernel.startswith("ref") or other.startswith("ref"):
            fails.append(f"{tag}: a reference kernel was timed for conv {name}: {line}")
        # the times are printed to 0.001 ms: rounding may move either by 0.0005
        if over and t_kept > 0.95 * t_other + 0.001:
            fails.append(f"{tag}: conv {name} took {kernel} at {t_kept} ms, not 5% faster than {t_other}: {line}")
        if not over and t_other < 0.95 * t_kept - 0.001:
            fails.append(f"{tag}: conv {name} kept oneDNN's first though {other} ran 5% faster: {line}")
    return fails
