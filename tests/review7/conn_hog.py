"""Hold COUNT half-sent HTTP requests to 127.0.0.1:PORT for up to 120 s,
reconnecting each one the server closes; prints "holding N" once they are
open. The flood of mcp_conn_hog.sh and ui_conn_hog.sh, run as uid 65534.
Usage (the script on stdin, as the uid may not read the tree): python3 - PORT COUNT 'REQUEST LINE'"""
import select
import socket
import sys
import time

port, count, line = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()


def hold():
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            # the headers never finished
            s.sendall(b"%s\r\nHost: 127.0.0.1:%d\r\n" % (line, port))
            s.setblocking(False)
            return s
        except OSError:
            time.sleep(0.01)


held = [hold() for _ in range(count)]
print("holding", len(held), flush=True)
end = time.time() + 120
while time.time() < end:
    r, _, _ = select.select(held, [], [], 0.2)
    for s in r:
        try:
            gone = s.recv(4096) == b""
        except OSError:
            gone = True
        if gone:
            held.remove(s)
            s.close()
            held.append(hold())
