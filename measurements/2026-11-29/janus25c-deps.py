# janus25c: dependencies of committed transactions (the coordinators' C
# lines of a janus::trace log): by the two coordinators' sites and paths,
# how many commit after their dependent; starts per 10 ms per site
# (burstiness); start -> commit by site and path.
# usage: python3 janus25c-deps.py RUN.err.gz
import sys, gzip, re, collections, statistics as st
path = sys.argv[1]; lo, hi = 1.0e9, 2.5e9
def site(n): return n % 3 if n < 18 else (n - 18) % 3
C = {}; S = {}
pat = re.compile(r'(\w+)=(\[[^\]]*\]|\S+)')
for line in gzip.open(path, 'rt'):
    i = line.find('janus::trace: ')
    if i < 0: continue
    rest = line[i + 14:]
    if rest[0] == 'C':
        f = dict(pat.findall(rest[2:])); t = int(f['txn'])
        if t not in C:
            d = f['deps'][1:-1]
            C[t] = (int(f['at']), f['fast'] == 'true', [int(x) for x in d.split(', ')] if d else [])
    elif rest[0] == 'S':
        f = dict(pat.findall(rest[2:])); S[int(f['txn'])] = int(f['at'])
def label(fast): return 'fast' if fast else 'slow'
by_site = collections.Counter(); by_site_late = collections.Counter(); late = collections.defaultdict(list)
by_path = collections.Counter(); by_path_late = collections.Counter(); ndeps = []
for t, (c, fast, deps) in C.items():
    if not lo <= c < hi: continue
    ndeps.append(len(deps))
    for d in deps:
        if d not in C: continue
        ks = (site(t >> 40), site(d >> 40)); kp = (fast, C[d][1])
        by_site[ks] += 1; by_path[kp] += 1
        if C[d][0] > c:
            by_site_late[ks] += 1; by_path_late[kp] += 1; late[ks].append((C[d][0] - c) / 1e6)
print(f"deps per commit mean {st.mean(ndeps):.0f}")
for k in sorted(by_site):
    L = late[k]; n = by_site_late[k]
    print(f" txn site {k[0]} dep site {k[1]}: deps {by_site[k]:7d}, committing after it {n:6d} ({n/by_site[k]:.1%}), by mean {st.mean(L) if L else 0:.1f} ms max {max(L) if L else 0:.1f}")
for k in sorted(by_path):
    n = by_path_late[k]
    print(f" txn {label(k[0])} dep {label(k[1])}: deps {by_path[k]}, committing after it {n} ({n/by_path[k]:.1%})")
for s in range(3):
    b = collections.Counter((S[t] // 10_000_000) for t in S if site(t >> 40) == s and lo <= S[t] < hi)
    v = [b.get(i, 0) for i in range(int(lo // 1e7), int(hi // 1e7))]
    print(f" starts per 10 ms, site {s}: mean {st.mean(v):.1f} sd {st.pstdev(v):.1f} cv {st.pstdev(v)/st.mean(v):.2f}")
dur = collections.defaultdict(list)
for t, (c, fast, deps) in C.items():
    if lo <= c < hi and t in S: dur[(site(t >> 40), fast)].append((c - S[t]) / 1e6)
for k in sorted(dur):
    L = sorted(dur[k]); print(f" site {k[0]} {label(k[1])}: n {len(L)} start->commit mean {st.mean(L):.0f} p10 {L[len(L)//10]:.0f} p90 {L[len(L)*9//10]:.0f} ms")
