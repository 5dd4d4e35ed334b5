#!/usr/bin/env python3
"""Joins the PCs that scripts/stalls.cpp sampled (its CUZK_STALLS_CSV) with
the kernels' SASS, for #27's question of what level 0 waits on: samples by
opcode and stall reason, then the most sampled instructions in context.

  cuobjdump -xelf all target/release/build/cuzk-kernels-*/out/*-fixed_msm.o
  cuobjdump -sass *.sm_90.cubin > fixed_msm.sass   (nvdisasm on PATH)
  scripts/stalls_sass.py stalls_dense26.csv fixed_msm.sass [TOP]

The SASS must come from the same build as the binary that was sampled."""
import collections
import re
import sys


def read_sass(path):
    """{mangled function: {pc: (instruction, stall)}} from cuobjdump -sass
    text. `stall` is the compiler's stall count (control bits 105-108 of
    the 128-bit sm_70+ instruction, in the second hex word): the cycles the
    warp waits before its next instruction, for fixed-latency results."""
    funcs, cur, last = {}, None, None
    for line in open(path):
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            cur, last = funcs.setdefault(m.group(1), {}), None
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m and cur is not None:
            last = int(m.group(1), 16)
            cur[last] = (m.group(2), None)
            continue
        m = re.match(r"\s*/\*\s*(0x[0-9a-f]{16})\s*\*/\s*$", line)
        if m and cur is not None and last is not None:
            cur[last] = (cur[last][0], (int(m.group(1), 16) >> 41) & 0xF)
            last = None
    return funcs


def opcode(instr):
    """The opcode without its predicate (IMAD.WIDE.U32.X, LDG.E.128, ...)."""
    words = instr.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else "?"


def main():
    csv, sass = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    funcs = read_sass(sass)
    # samples[function][pc][reason]
    samples = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    for line in open(csv).readlines()[1:]:
        fn, pc, reason, n = line.rstrip("\n").rsplit(",", 3)
        samples[fn][int(pc)][reason] += int(n)
    for fn, pcs in samples.items():
        code = funcs.get(fn)
        issued = lambda c: sum(v for r, v in c.items() if "not_issued" not in r)
        total = sum(issued(c) for c in pcs.values())
        print("== %s: %d samples over %d PCs%s" % (fn[:120], total, len(pcs),
              "" if code else " (not in the SASS given)"))
        if not code:
            continue
        by_op = collections.defaultdict(collections.Counter)
        for pc, c in pcs.items():
            op = opcode(code.get(pc, ("?", None))[0])
            for r, v in c.items():
                if "not_issued" not in r:
                    by_op[op][r] += v
        print("  by opcode (share of the kernel's samples; its top reasons):")
        for op, c in sorted(by_op.items(), key=lambda kv: -sum(kv[1].values()))[:15]:
            n = sum(c.values())
            reasons = ", ".join("%s %.0f%%" % (r, 100.0 * v / n) for r, v in c.most_common(3))
            print("    %-24s %5.1f%%  %s" % (op, 100.0 * n / total, reasons))
        print("  the most sampled instructions (s: the compiler's stall count):")
        for pc, c in sorted(pcs.items(), key=lambda kv: -issued(kv[1]))[:top]:
            n = issued(c)
            reasons = ", ".join("%s %d" % (r, v) for r, v in c.most_common(3) if "not_issued" not in r)
            instr, stall = code.get(pc, ("?", None))
            print("    %05x %5.2f%%  %-48s s%-2s %s" % (pc, 100.0 * n / total, instr[:48],
                                                    "?" if stall is None else stall, reasons))


if __name__ == "__main__":
    main()
