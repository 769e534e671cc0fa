"""The construction kernel in plain Python, on Python integers (the reference of compare.py)."""

CANDIDATES = 6


def free_runs(free, size):
    runs, span = free, 1
    while span < size:
        shift = min(span, size - span)
        runs &= runs >> shift
        span += shift
    return runs


def lowest(mask, count):
    out = []
    while mask and len(out) < count:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def construct(T, G, busy, room, sizes, arrivals, lasts, durs, legals, wl, wr, out):
    full = (1 << G) - 1
    for j in range(len(sizes)):
        size = sizes[j]
        start = arrivals[j]
        last = lasts[j]
        dur = durs[j]
        legal = legals[j]
        found = -1
        firsts = 0
        free = 0
        while start <= last:
            end = min(T, start + dur)
            short = -1
            for s in range(end - 1, start - 1, -1):
                if room[s] < size:
                    short = s
                    break
            if short >= 0:
                start = short + 1
                continue
            acc = 0
            for s in range(start, end):
                acc |= busy[s]
            free = ~acc & full
            firsts = free_runs(free, size) & legal
            if firsts:
                found = start
                break
            start += 1
        if found < 0:
            out[j] = -1
            continue
        end = min(T, found + dur)
        if firsts & (firsts - 1) == 0:
            first = firsts.bit_length() - 1
        else:
            b = (full & ~free) | (1 << G)
            left = firsts & ((b << 1) | wl[size])
            right = firsts & ((b >> size) | wr[size])
            ex = left & right
            cands = (
                lowest(ex, CANDIDATES)
                if ex
                else (lowest(left | right, CANDIDATES) or lowest(firsts, 1))
            )
            first = -1
            bestk = None
            for f in cands:
                m = ((1 << size) - 1) << f
                t = size if found == 0 else (busy[found - 1] & m).bit_count()
                t += size if end >= T else (busy[end] & m).bit_count()
                k = (t, -f)
                if bestk is None or k > bestk:
                    bestk = k
                    first = f
        m = ((1 << size) - 1) << first
        for s in range(found, end):
            busy[s] |= m
            room[s] -= size
        out[j] = found * 1000 + first
