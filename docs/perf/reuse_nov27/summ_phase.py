# Rows split by the VM's phase, judged by the MPI reference timed beside each row
# (bimodal: fast / slow); kolo time and speedup medians per variant within a phase.
import sys, statistics as st
rows = []; cur = None
for path in sys.argv[1:]:
    for l in open(path):
        if l.startswith('##'):
            _, _, r, v, c = l.split(); cur = (v, c); continue
        f = l.split(); rows.append((cur[1], int(f[0]), cur[0], float(f[5]), float(f[9]), float(f[11])))
for key in sorted({(r[0], r[1]) for r in rows}):
    sel = [r for r in rows if (r[0], r[1]) == key]
    cut = (min(r[4] for r in sel) + max(r[4] for r in sel)) / 2
    print(f"{key[0]} {key[1]} B (phase cut at MPI {cut:.2f} us)")
    for phase, test in (('fast', lambda r: r[4] < cut), ('slow', lambda r: r[4] >= cut)):
        for v in ('base', 'new'):
            s = [r for r in sel if r[2] == v and test(r)]
            if not s: continue
            print(f"  {phase} {v}: n={len(s)} kolo {st.median([r[3] for r in s]):.2f} us, MPI {st.median([r[4] for r in s]):.2f}, speedup {st.median([r[5] for r in s]):.2f} ({min(r[5] for r in s):.2f}-{max(r[5] for r in s):.2f})")
