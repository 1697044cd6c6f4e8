# Size of the component (SCC) each transaction executed in, from the
# janus::stats lines of one run: count-weighted mean of the lines' p50 and
# p99, and the max, over the row's window per site (site = node % 3 with
# three replicas), and per 250 ms of virtual time over the whole run.
# usage: python3 janus22a-scc-window.py RUN.err
import re, sys
tot, b = {}, {}
for l in open(sys.argv[1]):
    if ' scc=(' not in l: continue
    at = int(re.search(r' at=(\d+)', l).group(1))
    me = int(re.search(r' me=(\d+)', l).group(1))
    p50, p99, mx, n = [int(x) for x in re.search(r' scc=\(([^)]*)\)', l).group(1).split(',')]
    c, _, _, _ = [int(x) for x in re.search(r' commit=\(([^)]*)\)', l).group(1).split(',')]
    k = at // 250_000_000
    d = b.setdefault(k, [0, 0, 0]); d[0] += n; d[1] += n*p50; d[2] = max(d[2], mx)
    if 1.0e9 < at <= 2.5e9:
        for key in (me % 3, 'all'):
            t = tot.setdefault(key, [0, 0, 0, 0, 0, 0]); t[0] += n; t[1] += n*p50; t[2] += n*p99; t[3] = max(t[3], mx)
            p50c, _, _, nc = [int(x) for x in re.search(r' commit=\(([^)]*)\)', l).group(1).split(',')]
            t[4] += nc; t[5] += nc*p50c
for k in sorted(tot, key=str):
    t = tot[k]
    print(f"site {k}: executed {t[0]} scc ~p50 {t[1]/max(1,t[0]):.0f} ~p99 {t[2]/max(1,t[0]):.0f} max {t[3]}; deps per Commit ~p50 {t[5]/max(1,t[4]):.0f}")
print("per 250 ms (start: executed / ~p50 scc / max scc):")
print(' '.join('%.2fs:%d/%.0f/%d' % (k/4, d[0], d[1]/max(1, d[0]), d[2]) for k, d in sorted(b.items())))
