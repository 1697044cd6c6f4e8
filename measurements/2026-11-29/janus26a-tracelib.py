# Shared by the janus::trace analyses (janus25c-trace.py, janus26a-exec.py):
# the trace lines of a log, and the committed graph's strongly connected
# components.
import gzip, re

PAT = re.compile(r'(\w+)=(\[[^\]]*\]|\S+)')


def events(path, kinds=None):
    """(kind letter, its fields as strings) of each janus::trace line of
    `path` (gzipped if it ends in .gz), of `kinds` only if given."""
    op = gzip.open if path.endswith('.gz') else open
    for line in op(path, 'rt'):
        i = line.find('janus::trace: ')
        if i < 0: continue
        rest = line[i + 14:].rstrip('\n')
        if kinds is not None and rest[0] not in kinds: continue
        yield rest[0], dict(PAT.findall(rest[2:]))


# components(deps): iterative Tarjan over `deps` (txn -> its committed dependencies; those not in
# `deps` are ignored). Returns comp (txn -> component index), comps (the
# components, in reverse topological order: one comes after its
# dependencies' components) and cdeps (per component, the components its
# members depend on).
def components(deps):
    index = {}; low = {}; onst = set(); stack = []; comp = {}; comps = []
    idx = 0
    for root in deps:
        if root in index: continue
        work = [(root, 0)]
        while work:
            v, pi = work.pop()
            if pi == 0:
                index[v] = low[v] = idx; idx += 1; stack.append(v); onst.add(v)
            ds = [d for d in deps[v] if d in deps]
            recurse = False
            for j in range(pi, len(ds)):
                w = ds[j]
                if w not in index:
                    work.append((v, j + 1)); work.append((w, 0)); recurse = True; break
                elif w in onst:
                    low[v] = min(low[v], index[w])
            if recurse: continue
            # all children done: fold low of children done via tree edges
            for w in ds:
                if w in onst and comp.get(w) is None and index[w] > index[v]:
                    low[v] = min(low[v], low[w])
            if low[v] == index[v]:
                c = []
                while True:
                    w = stack.pop(); onst.discard(w); comp[w] = len(comps); c.append(w)
                    if w == v: break
                comps.append(c)
    cdeps = []
    for ci, c in enumerate(comps):
        s = set()
        for v in c:
            for d in deps[v]:
                if d in comp and comp[d] != ci: s.add(comp[d])
        cdeps.append(s)
    return comp, comps, cdeps
