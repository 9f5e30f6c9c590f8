#!/usr/bin/env python3
"""A DNS server for tests/egress/transparent.sh's rebinding test, on
127.0.0.1:53 inside a network namespace of the test's own: the first A
query for a name is answered with FIRST, every later one with LATER (a
rebinding name); AAAA and other types get an empty answer. Prints "ready"
once it listens, then serves until killed.
Usage: rebind_dns.py FIRST LATER"""
import socket
import sys

first, later = socket.inet_aton(sys.argv[1]), socket.inet_aton(sys.argv[2])
seen = set()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(512)
    if len(q) < 12:
        continue
    end = 12
    while end < len(q) and q[end] != 0:
        end += q[end] + 1
    question = q[12:end + 5]
    name = q[12:end].lower()
    qtype = int.from_bytes(q[end + 1:end + 3], "big")
    header = q[:2] + b"\x81\x80" + b"\x00\x01"
    if qtype == 1:
        addr = later if name in seen else first
        seen.add(name)
        answer = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x00\x00\x04" + addr
        s.sendto(header + b"\x00\x01\x00\x00\x00\x00" + question + answer, peer)
    else:
        s.sendto(header + b"\x00\x00\x00\x00\x00\x00" + question, peer)
