# Offline analysis of janus::trace lines (janus25c): where a transaction's
# time goes between its commit and its execution at each replica.
# Run: TESSERA_LOG=warn,tessera_protocols::janus::trace=debug tessera bench ... 2> RUN.err
# Servers are nodes 0-17 (shard s replica r = 3s+r, on site r), client
# hosts from 18 on (host h on site h % 3). For each transaction executed
# at a replica: its commit known there -> every ancestor (its component's
# members included) known committed there (computed from the committed
# graph of the coordinators' C lines and the replicas' K lines) -> executed.
# usage: python3 janus25c-trace.py RUN.err.gz [LO_S HI_S [NSERV]] (NSERV: servers, 18 for
# TPC-C, 9 for the micro-benchmark; session 30 added it and the start->commit lines)
import sys, gzip, re, collections, statistics as st
sys.setrecursionlimit(100000)
path = sys.argv[1]
lo = float(sys.argv[2]) * 1e9 if len(sys.argv) > 2 else 1.0e9
hi = float(sys.argv[3]) * 1e9 if len(sys.argv) > 3 else 2.5e9
NSERV = int(sys.argv[4]) if len(sys.argv) > 4 else 18
def site(n): return n % 3 if n < NSERV else (n - NSERV) % 3
def coord(t): return t >> 40
S = {}; C = {}; A = {}; Q = collections.defaultdict(list); shards = {}
K = {}  # (node, txn) -> (at, mine, from, kind)
E = {}; I = collections.defaultdict(list); P = {}; F = {}; O = {}
import importlib.util, os
_spec = importlib.util.spec_from_file_location('janus26a_tracelib', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'janus26a-tracelib.py'))
lib = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(lib)
for ev, f in lib.events(path):
    at = int(f['at']); txn = int(f['txn'])
    if ev == 'K':
        me = int(f['me']); k = (me, txn)
        if k not in K: K[k] = (at, f['mine'] == 'true', int(f['from']), int(f['kind']))
    elif ev == 'E':
        k = (int(f['me']), txn)
        if k not in E: E[k] = at
    elif ev == 'C':
        if txn not in C:
            d = f['deps'][1:-1]
            C[txn] = (at, f['fast'] == 'true', [int(x) for x in d.split(', ')] if d else [])
    elif ev == 'S':
        S[txn] = at; d = f['shards'][1:-1]; shards[txn] = [int(x) for x in d.split(', ')] if d else []
    elif ev == 'A':
        A.setdefault(txn, at)
    elif ev == 'Q':
        Q[txn].append((at, int(f['from'])))
    elif ev == 'I':
        I[(int(f['me']), txn)].append((at, int(f['to']), int(f['why'])))
    elif ev == 'P':
        P.setdefault((int(f['me']), txn, int(f['from'])), at)
    elif ev == 'F':
        F.setdefault((int(f['me']), txn, int(f['piece'])), at)
    elif ev == 'O':
        O.setdefault((int(f['me']), txn, int(f['piece'])), at)
print(f"txns started {len(S)} committed {len(C)} answered {len(A)}; K {len(K)} E {len(E)} I {len(I)}")
# SCCs of the committed graph (iterative Tarjan, janus26a-tracelib.py)
comp, comps, cdeps = lib.components({t: C[t][2] for t in C})
# comps are in reverse topological order (a comp is emitted after its deps' comps)
inwin = lambda t: lo <= C[t][0] < hi
sizes = [len(comps[comp[t]]) for t in C if inwin(t)]
print(f"component of a committed txn in window: mean {st.mean(sizes):.0f} median {st.median(sizes)} max {max(sizes)}")
# the spread of commit times inside components (ms)
spans = [ (max(C[m][0] for m in comps[comp[t]]) - C[t][0]) / 1e6 for t in C if inwin(t)]
print(f"last member's commit (at its coordinator) after a txn's own: mean {st.mean(spans):.1f} ms, p90 {sorted(spans)[int(len(spans)*.9)]:.1f}")
# per replica: ready time by DAG recursion
def known(n, t):
    k = K.get((n, t)); return k[0] if k else None
rows = collections.defaultdict(list)   # site -> list of tuples
for n in range(NSERV):
    sh = n // 3
    ready = [0] * len(comps)   # time all of a comp's ancestors (incl. its members) are known here
    crit = [None] * len(comps) # (txn) the last known
    for ci, c in enumerate(comps):
        best = -1; who = None
        for m in c:
            k = known(n, m)
            if k is not None and k > best: best, who = k, m
        for p in cdeps[ci]:
            if ready[p] > best: best, who = ready[p], crit[p]
        ready[ci] = best; crit[ci] = who
    for t in C:
        if not inwin(t) or (n, t) not in E or (n, t) not in K: continue
        if sh not in shards.get(t, []): continue
        c0 = K[(n, t)][0]; e = E[(n, t)]; ci = comp[t]
        r = max(ready[ci], c0); w = crit[ci]
        wk = K.get((n, w)) if w is not None else None
        in_scc = w in comps[ci] if w is not None else False
        rows[site(n)].append((c0, r, e, w, in_scc, wk, t))
KIND = {6: 'Commit', 12: 'InquireOk', 13: 'Committed', 16: 'Forgotten'}
BASE = {0: 244, 1: 280, 2: 244}
def path(t):
    if C[t][1]: return 'fast'
    if t in S and (C[t][0] - S[t]) / 1e6 > BASE[site(coord(t))] + 50: return 'slow-far'
    return 'slow'
n = collections.Counter()
for t in C:
    if inwin(t) and t in S:
        n[(site(coord(t)), path(t))] += 1; n[('all', path(t))] += 1
print("\npaths by coordinator site (slow-far: a slow path that first waited for the farthest replica, > 50 ms over the majority's two round trips):")
for s_ in [0, 1, 2, 'all']:
    tot = sum(v for k, v in n.items() if k[0] == s_)
    print(f" site {s_}: " + ", ".join(f"{k[1]} {v} ({v/tot:.1%})" for k, v in sorted(n.items(), key=str) if k[0] == s_))
print("\nwait commit->all ancestors known, summed, by the path of the transaction and of the last ancestor known:")
for s in sorted(rows):
    W = collections.Counter(); tot = 0
    for c, r, e, w, in_scc, wk, t in rows[s]:
        if r > c and w is not None:
            W[(path(t), path(w))] += (r - c) / 1e6; tot += (r - c) / 1e6
    print(f" site {s}: total {tot/len(rows[s]):.1f} ms per txn; " + ", ".join(f"{k[0]}<-{k[1]} {v/len(rows[s]):.1f}" for k, v in W.most_common()))
print("\nper site of the executing replica (window by commit at the coordinator):")
for s in sorted(rows):
    R = rows[s]
    ce = [(e - c) / 1e6 for c, r, e, *_ in R]
    cr = [(r - c) / 1e6 for c, r, e, *_ in R]
    re_ = [(e - r) / 1e6 for c, r, e, *_ in R]
    print(f" site {s}: n {len(R)}  commit->exec mean {st.mean(ce):.1f} ms = commit->all ancestors known {st.mean(cr):.1f} + then->exec {st.mean(re_):.1f}")
    # critical ancestor: in own SCC or outside, how learnt, its coordinator site and its own commit time
    by = collections.Counter(); late = collections.defaultdict(list)
    for c, r, e, w, in_scc, wk, t in R:
        if r <= c or w is None or wk is None: by['self last'] += 1; continue
        how = KIND.get(wk[3], str(wk[3]))
        key = ('scc' if in_scc else 'anc', how, site(coord(w)))
        by[key] += 1
        late[key].append(((r - c) / 1e6, (wk[0] - C[w][0]) / 1e6, (C[w][0] - C[t][0]) / 1e6))
    tot = len(R)
    for key, cnt in by.most_common(12):
        if key == 'self last': print(f"   own commit last: {cnt/tot:.0%}"); continue
        L = late[key]
        print(f"   last known {key[0]} via {key[1]:9s} coord site {key[2]}: {cnt/tot:5.1%}  wait {st.mean(x[0] for x in L):6.1f} ms; it reached here {st.mean(x[1] for x in L):6.1f} ms after its commit, which came {st.mean(x[2] for x in L):6.1f} ms after this txn's")
# clients
print("\nclients, by site: committing->answer, and the site of the replica whose CommitOk completed the answer")
cl = collections.defaultdict(list); src = collections.defaultdict(collections.Counter)
for t, a in A.items():
    if t not in C or not inwin(t): continue
    s = site(coord(t)); cl[s].append((a - C[t][0]) / 1e6)
    # the first CommitOk per shard; the latest of those completes the answer
    firsts = {}
    for at, fr in sorted(Q[t]):
        firsts.setdefault(fr // 3, (at, fr))
    last = max(firsts.values())
    src[s][site(last[1])] += 1
for s in sorted(cl):
    n = sum(src[s].values())
    print(f" site {s}: n {len(cl[s])} mean {st.mean(cl[s]):.1f} ms; answered from site " + ", ".join(f"{k}: {v/n:.0%}" for k, v in sorted(src[s].items())))
# start -> commit decided at the coordinator, by path and site (session 30)
print("\nstart->commit at the coordinator, by path (mean ms, n):")
sc = collections.defaultdict(list)
for t in C:
    if inwin(t) and t in S:
        sc[path(t)].append((C[t][0] - S[t]) / 1e6)
for k, v in sorted(sc.items()):
    print(f" {k}: {st.mean(v):.1f} ms (median {st.median(v):.1f}), n {len(v)}")
tot = [(A[t] - S[t]) / 1e6 for t in A if t in C and t in S and inwin(t)]
print(f"start->answer mean {st.mean(tot):.1f} ms, median {st.median(tot):.1f}, n {len(tot)}")
