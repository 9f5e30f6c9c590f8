#!/usr/bin/env python3
"""serve --mcp-http holds 512 connections: a token holder (alice) keeping
600 keep-alive connections open, each having made a request, must not
lock another user (bob) out. Usage: conn_share.py PORT ALICE BOB.
Prints ok/FAIL lines; exit 0 when all held."""
import json
import socket
import sys

port, alice, bob = int(sys.argv[1]), sys.argv[2], sys.argv[3]
HELD = 600
fails = 0
BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "share", "version": "1"}}}).encode()


def check(name, good):
    global fails
    print(("  ok   " if good else "  FAIL ") + name)
    fails += 0 if good else 1


def request(s, token):
    """an initialize on s: its HTTP status, 0 when the connection is gone"""
    head = ("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            "Content-Length: %d\r\n\r\n" % (port, token, len(BODY))).encode()
    try:
        s.sendall(head + BODY)
        got = b""
        while b"\r\n\r\n" not in got:
            b = s.recv(4096)
            if not b:
                return 0
            got += b
        head, rest = got.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(rest) < length:
            b = s.recv(4096)
            if not b:
                return 0
            rest += b
        return int(head.split(b" ")[1])
    except OSError:
        return 0


def connect():
    # below serve's 60 s idle timeout: a connection waiting for a slot is
    # not let in by alice's idle ones expiring
    return socket.create_connection(("127.0.0.1", port), timeout=30)


held = []
for _ in range(HELD):
    try:
        s = connect()
    except OSError:
        break
    if request(s, alice) != 200:
        break
    held.append(s)
check("alice keeps %d connections open, each answered (%d)" % (HELD, len(held)),
      len(held) == HELD)
# every connection alice still has used again: none is near its idle timeout
alive = sum(request(s, alice) == 200 for s in held)
check("alice's connections within serve's bound still serve (%d)" % alive, 0 < alive <= 447)
b = connect()
check("bob's request is answered while alice holds them", request(b, bob) == 200)
check("bob's connection serves his next request", request(b, bob) == 200)
check("alice's least recently used connection gave way", request(held[0], alice) == 0)
check("alice's newest connection still serves", request(held[-1], alice) == 200)
alive = sum(request(s, alice) == 200 for s in held[HELD - 300:])
check("alice's 300 newest connections still serve (%d)" % alive, alive == 300)
sys.exit(1 if fails else 0)
