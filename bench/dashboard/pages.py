"""What bench/dashboard/run.sh and run-pg.sh time alike: the dashboard's
pages over one keep-alive HTTP connection with the signed-in session's
cookie, the cases lib.sh wrote, and the table of results."""
import http.client
import statistics
import time


def page_getter(ui, cookie):
    """a function that GETs a page and checks it shows records"""
    host, port = ui.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port))

    def page(path):
        conn.request("GET", path, headers={"Cookie": f"capsule_ui={cookie}"})
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200 and b'class="record"' in body, (path, r.status)

    return page


def timed(fn, each):
    """fn run on each argument, its times (ms) after the first 2 (the
    warm-up)"""
    for a in each[:2]:
        fn(a)
    out = []
    for a in each[2:]:
        t = time.perf_counter()
        fn(a)
        out.append((time.perf_counter() - t) * 1000)
    return out


def in_rounds(page_times, sql_times, path, sql, runs, rounds=5):
    """both sides timed in rounds, taking turns (2 warm-up runs each, then
    a share of the runs), so that a moment of load on the shared machine
    lands on both alike; page_times and sql_times: a list of arguments
    (the first 2 the warm-up) to their times. For distinct pages (lists
    of runs + 2: each run another), the warm-ups repeat the first two."""
    rounds = min(rounds, runs)
    distinct = isinstance(path, list)
    p, q = [], []
    lo = 2
    for r in range(rounds):
        n = runs // rounds + (1 if r < runs % rounds else 0)
        if distinct:
            pa, sa = path[:2] + path[lo:lo + n], sql[:2] + sql[lo:lo + n]
            lo += n
        else:
            pa, sa = [path] * (n + 2), [sql] * (n + 2)
        p += page_times(pa)
        q += sql_times(sa)
    return p, q


def read_cases(path):
    """(name, path, sql) a case; for distinct pages (one a run) the paths
    and the statements as lists"""
    out = []
    for line in open(path):
        name, p, q = line.rstrip("\n").split("\t")
        if " " in p:
            p, q = p.split(" "), q.split("\x1f")
        out.append((name, p, q))
    return out


def print_header(other):
    """the table's head; other: what the statement runs in"""
    print(f"| page | dashboard mean (ms) | {other} mean (ms) | ratio | dashboard median | {other} median | ratio |")
    print("|---|---|---|---|---|---|---|")


def print_row(name, p, q):
    """the mean, and the median, which a shared machine's moments of load
    move less"""
    pm, qm = statistics.mean(p), statistics.mean(q)
    pd, qd = statistics.median(p), statistics.median(q)
    print(f"| {name} | {pm:.2f} | {qm:.2f} | {pm / qm:.2f}x | {pd:.2f} | {qd:.2f} | {pd / qd:.2f}x |")
