#!/usr/bin/python3
"""An authenticated client's pending connection against unauthenticated
connections from many IPv6 addresses of one /64 (the attacker's own
network). Run inside a network namespace where fd00:15::/64 (the
attacker's) and fd00:16::/64 (the client's) are local on lo; serve
listens on [fd00:15::1]:PORT. argv: port token. Prints HELD or EVICTED
and exits 0 or 1; 77 when the set-up does not work."""
import socket
import sys
import time

port, token = int(sys.argv[1]), sys.argv[2]
SERVER = ("fd00:15::1", port)
FREEBIND = 78  # IPV6_FREEBIND


def conn(src):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, FREEBIND, 1)
    s.bind((src, 0))
    s.settimeout(30)
    s.connect(SERVER)
    return s


body = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
        '"2025-06-18","capabilities":{},"clientInfo":{"name":"r15","version":"1"}}}')
head = (f"POST /mcp HTTP/1.1\r\nHost: [fd00:15::1]:{port}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n")
rest = f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n{body}"

try:
    # the client's request, as a client far away sends it: its first bytes, then the rest
    attacker = [conn(f"fd00:15::{0x1000 + i:x}") for i in range(64)]  # the share filled
    client = conn("fd00:16::2")
    client.sendall(head.encode())
    time.sleep(0.5)
    # meanwhile: one more connection from each of 64 more addresses of the attacker's /64
    attacker += [conn(f"fd00:15::{0x2000 + i:x}") for i in range(64)]
    time.sleep(0.5)
except OSError as e:
    print(f"SKIP: cannot connect from the namespace's addresses: {e}")
    sys.exit(77)
try:
    client.sendall(rest.encode())
    answer = client.recv(4096)
except OSError as e:
    answer = f"({e})".encode()
status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
print(f"the client's request: {status or '(connection closed)'}")
if status.startswith("HTTP/1.1 200"):
    print("HELD: the client's pending connection stayed")
    sys.exit(0)
print("EVICTED: 128 connections from one /64 pushed out the authenticated client's pending one")
sys.exit(1)
