#!/usr/bin/python3
"""An authenticated client's pending connection (root's) against
unauthenticated connections from 128 uids of one local user's subordinate
range (CAPSULE_TEST_SUBUID names nobody's 300000-365535 for serve), each
connection made by a child process with a uid of its own, as newuidmap
lets such a user make them. serve listens on 127.0.0.1:PORT. argv: port
token. Prints HELD or EVICTED and exits 0 or 1; 77 when the set-up does
not work."""
import os
import socket
import sys
import time

port, token = int(sys.argv[1]), sys.argv[2]
SERVER = ("127.0.0.1", port)


def conn():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(SERVER)
    return s


children = []


def attacker(uid):
    """A child that connects as uid and holds the connection, sending nothing."""
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(hold_w)
        for _, earlier in children:  # so each earlier child sees its own end close
            os.close(earlier)
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(uid)
            s = conn()
            os.write(ready_w, b"y")
            os.read(hold_r, 1)  # until the parent closes its end
            s.close()
        except OSError:
            os.write(ready_w, b"n")
        os._exit(0)
    os.close(ready_w)
    os.close(hold_r)
    ok = os.read(ready_r, 1) == b"y"
    os.close(ready_r)
    children.append((pid, hold_w))
    return ok


body = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
        '"2025-06-18","capabilities":{},"clientInfo":{"name":"r15","version":"1"}}}')
head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n")
rest = f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n{body}"

status = 77
try:
    if not all(attacker(300000 + i) for i in range(64)):  # the share filled
        print("SKIP: a child could not connect as a subordinate uid")
        sys.exit(77)
    client = conn()
    client.sendall(head.encode())
    time.sleep(0.5)
    # meanwhile: one more connection from each of 64 more uids of the range
    if not all(attacker(300064 + i) for i in range(64)):
        print("SKIP: a child could not connect as a subordinate uid")
        sys.exit(77)
    time.sleep(0.5)
    try:
        client.sendall(rest.encode())
        answer = client.recv(4096)
    except OSError as e:
        answer = f"({e})".encode()
    line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    print(f"the client's request: {line or '(connection closed)'}")
    if line.startswith("HTTP/1.1 200"):
        print("HELD: the client's pending connection stayed")
        status = 0
    else:
        print("EVICTED: 128 connections from one user's subordinate uids pushed out root's pending one")
        status = 1
finally:
    for pid, hold in children:
        os.close(hold)
        os.waitpid(pid, 0)
sys.exit(status)
