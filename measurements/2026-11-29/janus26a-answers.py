# Client answers per second from the coordinators' A lines of a janus::trace
# log (janus26a): over 1.0-3.0 s and 1.5-3.0 s (at 3,000 three-site clients
# answers come in pulses, so a 1.5 s row window's phase moves the row by
# several per cent), and per 250 ms.
# usage: python3 janus26a-answers.py RUN.err.gz [LABEL [LO_S HI_S]] (LO-HI: one more window)
import sys, os, importlib.util
_spec = importlib.util.spec_from_file_location('janus26a_tracelib', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'janus26a-tracelib.py'))
lib = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(lib)
A = {}
for ev, f in lib.events(sys.argv[1], 'A'):
    A.setdefault(int(f['txn']), int(f['at']))
def rate(lo, hi): return sum(1 for a in A.values() if lo * 1e9 <= a < hi * 1e9) / (hi - lo)
per = [0] * 12
for a in A.values():
    if a < 3e9: per[int(a / 250e6)] += 1
label = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
more = ""
if len(sys.argv) > 4:
    lo, hi = float(sys.argv[3]), float(sys.argv[4])
    more = f", {lo}-{hi} s {rate(lo, hi):.0f}"
print(f"{label}: answered/s 1.0-3.0 s {rate(1.0, 3.0):.0f}, 1.5-3.0 s {rate(1.5, 3.0):.0f}{more}; per 250 ms from 0 s (per s): " + " ".join(str(4 * x) for x in per))
