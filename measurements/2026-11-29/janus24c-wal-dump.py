#!/usr/bin/env python3
"""Read a Janus server's write-ahead log (tessera-wal frames of group-committed
Janus records, janus/wal.rs) without building anything.

  janus24c-wal-dump.py LOG [TXN...]         records naming TXN (all if none):
                                            index, frame, kind, txn (+ deps)
  janus24c-wal-dump.py --unexecuted A B     txns with an Executed record in
                                            log A but not in log B

TXN as the server prints it, e.g. T6.0.4880. Used in session 24 (janus24c)
to find that a restarted replica held 8 transactions committed and never
executed while its peers executed them."""
import struct
import sys

KINDS = {1: 'PreAccepted', 2: 'Promised', 3: 'Accepted', 4: 'Committed',
         5: 'Executed', 6: 'Forgotten'}


def varint(b, i):
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7f) << s
        s += 7
        if x < 0x80:
            return v, i


def tid(t):
    return "T%d.%d.%d" % (t >> 40, (t >> 32) & 0xff, t & 0xffffffff)


def deps(r, j):
    n, j = varint(r, j)
    out = []
    for _ in range(n):
        t, = struct.unpack_from('<Q', r, j)
        j += 8
        k, j = varint(r, j)
        for _ in range(k):
            _, j = varint(r, j)
        out.append(tid(t))
    return out


def records(path):
    """(frame, kind, [txn ids], deps or None) per record, in log order."""
    d = open(path, 'rb').read()
    at = frame = 0
    while len(d) - at >= 8:
        n, = struct.unpack_from('<I', d, at)
        if len(d) - at - 8 < n:
            break
        p = d[at + 8:at + 8 + n]
        at += 8 + n
        frame += 1
        i = 0
        while i < len(p):
            ln, i = varint(p, i)
            r = p[i:i + ln]
            i += ln
            k = r[1]
            if k == 6:
                _, j = varint(r, 2)
                cnt, j = varint(r, j)
                ts = []
                for _ in range(cnt):
                    t, = struct.unpack_from('<Q', r, j)
                    j += 9
                    c = r[j]
                    j += 1
                    if c == 1:
                        m, j = varint(r, j)
                        j += 8 * m
                    ts.append(t)
                yield frame, KINDS[k], ts, None
            else:
                t, = struct.unpack_from('<Q', r, 2)
                ds = None
                if k in (1, 3):
                    _, j = varint(r, 10)
                    ds = deps(r, j)
                elif k == 4:
                    ds = deps(r, 10)
                yield frame, KINDS[k], [t], ds


def executed(path):
    return {ts[0] for _, k, ts, _ in records(path) if k == 'Executed'}


if __name__ == '__main__':
    if sys.argv[1] == '--unexecuted':
        a, b = executed(sys.argv[2]), executed(sys.argv[3])
        print(' '.join(tid(t) for t in sorted(a - b)))
        sys.exit(0)
    want = set(sys.argv[2:])
    for n, (f, k, ts, ds) in enumerate(records(sys.argv[1])):
        names = [tid(t) for t in ts]
        hit = [x for x in names if not want or x in want]
        if hit:
            print(n, f, k, ' '.join(hit), '' if ds is None else ds)
