# Sums the janus::stats "coordinator" lines of one run over the row's
# measured window, per client site: transactions answered, and the
# count-weighted means of the lines' mean / p50 / p90 (approximate) of
# start -> path chosen (PreAccept), start -> committing, committing -> the
# client's answer (first CommitOk of every shard), in ms.
# usage: python3 janus22a-coord-window.py RUN.err [LO_S HI_S]
import re, sys
err = sys.argv[1]
lo, hi = (float(sys.argv[2])*1e9, float(sys.argv[3])*1e9) if len(sys.argv) > 3 else (1.0e9, 2.5e9)
F = ['pre_accept_us', 'to_commit_us', 'commit_to_answer_us']
by = {}
for l in open(err):
    if 'coordinator' not in l or 'pre_accept_us=' not in l: continue
    at = int(re.search(r' at=(\d+)', l).group(1))
    if not (lo < at <= hi): continue
    site = int(re.search(r' site=(\d+)', l).group(1))
    for key in (site, 'all'):
        d = by.setdefault(key, {f: [0, 0, 0, 0, 0] for f in F})
        for f in F:
            n, mean, p50, p90, p99, mx = [int(x) for x in re.search(' ' + f + r'=\(([^)]*)\)', l).group(1).split(',')]
            a = d[f]; a[0] += n; a[1] += n*mean; a[2] += n*p50; a[3] += n*p90; a[4] = max(a[4], mx)
for key in sorted(by, key=str):
    print(f"== client site {key}")
    for f in F:
        a = by[key][f]
        if a[0]:
            print(f"  {f:20s} n {a[0]:6d} mean {a[1]/a[0]/1000:6.1f} ms ~p50 {a[2]/a[0]/1000:6.1f} ~p90 {a[3]/a[0]/1000:6.1f} max {a[4]/1000:6.1f}")
