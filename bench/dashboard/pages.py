"""What bench/dashboard/run.sh and run-pg.sh time alike: the dashboard's
pages over one keep-alive HTTP connection with the signed-in session's
cookie, the two sides in rounds, the cases lib.sh wrote, and the table
of results."""
import socket
import statistics
import time


def page_getter(ui, cookie):
    """a function that GETs a page and checks it shows records: HTTP/1.1
    on one keep-alive socket, the answer read to its Content-Length and
    its status and head found by hand (http.client's header parsing, the
    email package's, cost a tenth of a millisecond a page: the client's
    time, not the server's; psql's \\timing likewise stops before psql
    prints)"""
    host, port = ui.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()

    def page(path):
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {ui}\r\nCookie: capsule_ui={cookie}\r\n\r\n".encode())
        while (end := buf.find(b"\r\n\r\n")) < 0:
            buf.extend(sock.recv(65536) or b"")
        head = bytes(buf[:end]).lower()
        length = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
        while len(buf) < end + 4 + length:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            buf.extend(chunk)
        body = bytes(buf[end + 4:end + 4 + length])
        del buf[:end + 4 + length]
        assert head.startswith(b"http/1.1 200") and b'class="record"' in body, (path, head[:40])

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
