# Offline analysis of janus::trace lines (janus26a): where a replica's time
# goes *after* every ancestor of a transaction is known committed there,
# until it executes it. Needs the W lines (a component stopped short of
# executing: why 0 an unknown member, 1 an unprocessed local ancestor
# outside it, 2 a member waiting for another shard's output, section 4) besides
# janus25c's K/E/C/S/F/O lines.
# Run: TESSERA_LOG=warn,tessera_protocols::janus::trace=debug tessera bench ... 2> RUN.err
# usage: python3 janus26a-exec.py RUN.err.gz [LO_S HI_S]
# Servers are nodes 0-17 (shard s replica r = 3s+r, on site r).
import sys, gzip, re, collections, statistics as st, bisect
path = sys.argv[1]
lo = float(sys.argv[2]) * 1e9 if len(sys.argv) > 2 else 1.0e9
hi = float(sys.argv[3]) * 1e9 if len(sys.argv) > 3 else 2.5e9
NSERV = 18
def site(n): return n % 3 if n < NSERV else (n - NSERV) % 3
S = {}; C = {}; shards = {}
K = {}; E = {}; D = {}
F = {}; O = {}               # (node, txn) -> first fetch sent / first output received (any piece)
W = collections.defaultdict(list)  # node -> [(at, head, why, on)]
import importlib.util, os
_spec = importlib.util.spec_from_file_location('janus26a_tracelib', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'janus26a-tracelib.py'))
lib = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(lib)
for ev, f in lib.events(path, 'KEDCSFOW'):
    at = int(f['at']); txn = int(f['txn'])
    if ev == 'K':
        K.setdefault((int(f['me']), txn), at)
    elif ev == 'E':
        E.setdefault((int(f['me']), txn), at)
    elif ev == 'D':
        D.setdefault((int(f['me']), txn), at)
    elif ev == 'C':
        if txn not in C:
            d = f['deps'][1:-1]
            C[txn] = (at, [int(x) for x in d.split(', ')] if d else [])
    elif ev == 'S':
        S[txn] = at; d = f['shards'][1:-1]; shards[txn] = [int(x) for x in d.split(', ')] if d else []
    elif ev == 'F':
        F.setdefault((int(f['me']), txn), at)
    elif ev == 'O':
        k = (int(f['me']), txn)
        O[k] = max(O.get(k, 0), at)
    elif ev == 'W':
        W[int(f['me'])].append((at, txn, int(f['why']), int(f['on'])))
print(f"txns committed {len(C)}; K {len(K)} E {len(E)} D {len(D)} F {len(F)} O {len(O)} W {sum(len(v) for v in W.values())}")
# components of the committed graph (janus26a-tracelib.py)
comp, comps, cdeps = lib.components({t: C[t][1] for t in C})
inwin = lambda t: lo <= C[t][0] < hi
# ready[n][t]: every ancestor (its component included) known committed at n
ready = {}
for n in range(NSERV):
    r = [0] * len(comps)
    for ci, c in enumerate(comps):
        best = max((K.get((n, m), -1) for m in c), default=-1)
        for p in cdeps[ci]:
            best = max(best, r[p])
        r[ci] = best
    ready[n] = r
def rdy(n, t): return max(ready[n][comp[t]], K.get((n, t), -1))
def local(n, t): return (n // 3) in shards.get(t, [])
# per node: W lines sorted by time for the look-up of the last stop before an execution
for n in W: W[n].sort()
Wat = {n: [w[0] for w in W[n]] for n in W}
# the stop of t's component at n in (r, e]: the last W line whose head is a member
def last_stop(n, t, r, e):
    members = set(comps[comp[t]])
    ws = W.get(n, []); ats = Wat.get(n, [])
    j = bisect.bisect_right(ats, e) - 1
    while j >= 0 and ws[j][0] >= r:
        at, head, why, on = ws[j]
        if head in members: return (at, why, on)
        j -= 1
    return None
WHY = {0: 'unknown member', 1: 'local ancestor outside', 2: 'member awaits output'}
for s in range(3):
    gaps = []; by = collections.Counter(); byn = collections.Counter()
    own_fetch = []; ofetch = []; cp_lag = []; cp_ready_lag = []; cp_exec_after_ready = []
    blk_exec = []
    n_local = 0
    for n in range(s, NSERV, 3):
        for t in C:
            if not inwin(t) or (n, t) not in E or (n, t) not in K or not local(n, t): continue
            n_local += 1
            r = rdy(n, t); e = E[(n, t)]
            g = (e - r) / 1e6
            gaps.append(max(g, 0))
            if g <= 0.5: by['none (<=0.5 ms)'] += 0; continue
            st_ = last_stop(n, t, r, e)
            if st_ is None:
                by['no stop line'] += g; byn['no stop line'] += 1; continue
            at, why, on = st_
            key = WHY[why]
            if why == 2:
                key += ' (itself)' if on == t else ' (an earlier member)'
                # the awaited member's fetch and its counterpart (same site, the shard with no F)
                if (n, on) in F and (n, on) in O:
                    ofetch.append((O[(n, on)] - F[(n, on)]) / 1e6)
                others = [3 * b + s for b in shards.get(on, []) if b != n // 3 and (3 * b + s, on) not in F]
                if others:
                    cp = others[0]
                    if (cp, on) in E and (n, on) in O:
                        cp_lag.append((E[(cp, on)] - rdy(n, on)) / 1e6)
                        cp_ready_lag.append((rdy(cp, on) - rdy(n, on)) / 1e6)
                        cp_exec_after_ready.append((E[(cp, on)] - rdy(cp, on)) / 1e6)
            elif why == 1:
                if (n, on) in E:
                    blk_exec.append((E[(n, on)] - r) / 1e6)
            by[key] += g; byn[key] += 1
    tot = sum(gaps)
    print(f"\nsite {s}: {n_local} local executions in window; ready->executed mean {tot/n_local:.1f} ms "
          f"(p50 {st.median(gaps):.1f}, p90 {sorted(gaps)[int(.9*len(gaps))]:.1f})")
    for k, v in by.most_common():
        if v: print(f"   last stop: {k:28s} {v/n_local:6.1f} ms per execution, {byn[k]} executions")
    def m(x): return f"{st.mean(x):.1f}" if x else "-"
    print(f"   awaited output: fetch->output mean {m(ofetch)} ms (n {len(ofetch)}); the awaited member at its counterpart "
          f"(same site, home shard): ready there - ready here {m(cp_ready_lag)} ms, executed there - ready there {m(cp_exec_after_ready)} ms, "
          f"executed there - ready here {m(cp_lag)} ms")
    print(f"   local ancestor outside: it executed {m(blk_exec)} ms after this one's ready (n {len(blk_exec)})")
# fetches overall by site
print("\nfetches (first F -> last O per (replica, txn)) by site of the fetching replica:")
for s in range(3):
    x = [(O[k] - F[k]) / 1e6 for k in F if k in O and k[0] % 3 == s and k[1] in C and inwin(k[1])]
    if x: print(f" site {s}: n {len(x)} mean {st.mean(x):.1f} p50 {st.median(x):.1f} p90 {sorted(x)[int(.9*len(x))]:.1f} ms")

# Each fetch (first F -> its O at the fetching replica), against when the
# counterpart (same site, the transaction's shard that sent no fetch, i.e.
# its home shard) executed the transaction: a fetch sent after the
# counterpart executed costs a whole round trip inside the site.
print("\nfetches: output - fetch, counterpart executed - fetch, output - counterpart executed (ms; p10/p50/p90/p99):")
q = lambda x, p: x[int(p * (len(x) - 1))]
for s in range(3):
    R = []
    for (n, m), f in F.items():
        if n % 3 != s or (n, m) not in O or m not in C or not inwin(m): continue
        others = [3 * b + s for b in shards.get(m, []) if b != n // 3 and (3 * b + s, m) not in F]
        if not others or (others[0], m) not in E: continue
        e = E[(others[0], m)]
        R.append(((O[(n, m)] - f) / 1e6, (e - f) / 1e6, (O[(n, m)] - e) / 1e6))
    if not R: continue
    cols = [sorted(r[i] for r in R) for i in range(3)]
    after = sum(1 for r in R if r[1] < 0) / len(R)
    print(f" site {s}: n {len(R)}; " + "; ".join(
        f"{name} " + "/".join(f"{q(c, p):.1f}" for p in (.1, .5, .9, .99))
        for name, c in zip(("O-F", "Ecp-F", "O-Ecp"), cols)) + f"; counterpart had executed before the fetch: {after:.0%}")
# Members stopped on an output per component, at one replica per site
# (the components are the same everywhere).
print("\ncomponents with a member in the window: distinct members a replica stopped on for an output (why 2):")
for s in range(3):
    stalls = []; big = []
    for n in range(s, NSERV, 3):
        byc = collections.defaultdict(set)
        for at, head, why, on in W.get(n, []):
            if why == 2 and head in comp: byc[comp[head]].add(on)
        for ci, ons in byc.items():
            c = comps[ci]
            if not any(inwin(m) for m in c): continue
            stalls.append(len(ons))
            if len(c) >= 50: big.append((len(c), len(ons), sum(1 for m in c if local(n, m))))
    if big:
        print(f" site {s}: {len(stalls)} (replica, component) pairs stopped, mean {st.mean(stalls):.1f} members (max {max(stalls)}); "
              f"components of 50+: {len(big)} pairs, {st.mean(b[0] for b in big):.0f} members, {st.mean(b[2] for b in big):.0f} with pieces at the replica, "
              f"{st.mean(b[1] for b in big):.1f} stopped on")
# Ancestors asked of the replica that named them in a component adopted
# from a Forgotten answer (I why 2): that replica stays silent about one it
# forgot only as an ancestor, and the retry to every server (I why 1) comes
# a retransmit period later. Per (replica, such a transaction) asked in the
# window: the components stopped on it (W lines naming it) and for how long.
I = collections.defaultdict(list)
for ev, f in lib.events(path, 'I'):
    I[(int(f['me']), int(f['txn']))].append((int(f['at']), int(f['why'])))
Won = collections.defaultdict(list)
for n, ws in W.items():
    for at, head, why, on in ws:
        Won[(n, on)].append((at, head))
print("\nancestors asked of the replica that named them (Inquire why 2), in the window, with components stopped on them:")
tot = collections.Counter()
for (n, t), iv in sorted(I.items(), key=lambda kv: min(a for a, _ in kv[1])):
    vias = [a for a, w in iv if w == 2]
    if not vias or not lo <= min(vias) < hi or (n, t) not in Won: continue
    i0 = min(vias); ws = Won[(n, t)]
    w0 = min(a for a, _ in ws); heads = len({h for _, h in ws})
    retry = [a for a, w in iv if w == 1 and a >= i0]
    end = min(retry) if retry else max(a for a, _ in ws)
    print(f"  replica {n} (site {n % 3}) txn {t}: asked at {i0/1e6:.0f} ms, first stop {(w0 - i0)/1e6:+.0f} ms, "
          f"retry {('%+.0f ms' % ((min(retry) - i0)/1e6)) if retry else 'none'}; {heads} transactions stopped on it")
    tot[n % 3] += heads * max(end - w0, 0) / 1e6
for s in range(3):
    print(f" site {s}: transaction-ms stopped until the retry: {tot[s]:.0f}")
