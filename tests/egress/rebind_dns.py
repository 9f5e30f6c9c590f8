#!/usr/bin/env python3
"""A DNS server for tests/egress/transparent.sh's host-side resolver tests,
on 127.0.0.1:53 inside a network namespace of the test's own: the first A
query for a name is answered with FIRST, every later one with LATER (a
rebinding name), with TTL 0 — except names that start with
  keep-   the same with TTL 300 (capsule keeps the first answer),
  short-  the same with TTL 1 (capsule asks again once it ran out),
  alias-  a CNAME (TTL 300) to meta.target, whose A record is LATER.
AAAA and other types get an empty answer (NODATA, no SOA). Prints "ready"
once it listens, then one line per query ("query NAME TYPE"), and serves
until killed.
Usage: rebind_dns.py FIRST LATER"""
import socket
import struct
import sys

first, later = socket.inet_aton(sys.argv[1]), socket.inet_aton(sys.argv[2])
seen = set()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
print("ready", flush=True)


def wire(name):
    return b"".join(bytes([len(p)]) + p for p in name.split(b".")) + b"\x00"


def rr(owner, rtype, ttl, rdata):
    return owner + struct.pack(">HHIH", rtype, 1, ttl, len(rdata)) + rdata


while True:
    q, peer = s.recvfrom(512)
    if len(q) < 12:
        continue
    end = 12
    while end < len(q) and q[end] != 0:
        end += q[end] + 1
    question = q[12:end + 5]
    name = q[12:end].lower()
    labels, i = [], 0
    while i < len(name):
        labels.append(name[i + 1:i + 1 + name[i]])
        i += name[i] + 1
    dotted = b".".join(labels)
    qtype = int.from_bytes(q[end + 1:end + 3], "big")
    print("query", dotted.decode(errors="replace"), qtype, flush=True)
    answers = []
    if qtype == 1:
        ttl = 300 if dotted.startswith(b"keep-") else 1 if dotted.startswith(b"short-") else 0
        if dotted.startswith(b"alias-"):
            answers.append(rr(b"\xc0\x0c", 5, 300, wire(b"meta.target")))
            answers.append(rr(wire(b"meta.target"), 1, 300, later))
        else:
            addr = later if dotted in seen else first
            seen.add(dotted)
            answers.append(rr(b"\xc0\x0c", 1, ttl, addr))
    header = q[:2] + b"\x81\x80" + struct.pack(">HHHH", 1, len(answers), 0, 0)
    s.sendto(header + question + b"".join(answers), peer)
