#!/usr/bin/env python3
"""Local upstreams for tests/egress/transparent.sh, on 127.0.0.1 only:
plain HTTP and HTTPS echoing the request line and Host, an IMAP server over
TLS (IMAP4_SSL) and an SMTP server with STARTTLS, each speaking just enough
of its protocol for Python's imaplib and smtplib, and a server that reads
to the client's half-close and then answers (drain). Prints the ports as one
JSON line, then serves until killed.
Usage: tservers.py KEY CERT"""
import hashlib
import http.server
import json
import socket
import socketserver
import ssl
import sys
import threading

key, cert = sys.argv[1], sys.argv[2]
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(cert, key)


class Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = "%s %s host=%s\n" % (self.command, self.path, self.headers.get("Host"))
        auth = self.headers.get("Authorization")
        if auth:  # a hash, so the test sees what arrived without the secret in the output
            body += "auth#sha256=%s\n" % hashlib.sha256(auth.encode()).hexdigest()
        body = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def lines(f):
    while True:
        line = f.readline()
        if not line:
            return
        yield line.decode("utf-8", "replace").rstrip("\r\n")


class Imap(socketserver.StreamRequestHandler):
    def handle(self):
        conn = tls.wrap_socket(self.request, server_side=True)
        f = conn.makefile("rwb")
        f.write(b"* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] test imap ready\r\n")
        f.flush()
        for line in lines(f):
            tag, _, rest = line.partition(" ")
            cmd = rest.split(" ")[0].upper()
            if cmd == "CAPABILITY":
                f.write(b"* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n")
            elif cmd == "LOGOUT":
                f.write(b"* BYE logging out\r\n%s OK LOGOUT done\r\n" % tag.encode())
                f.flush()
                return
            f.write(b"%s OK %s done\r\n" % (tag.encode(), cmd.encode()))
            f.flush()


class Smtp(socketserver.StreamRequestHandler):
    def handle(self):
        sock = self.request
        f = sock.makefile("rwb")
        f.write(b"220 mail.test ESMTP test\r\n")
        f.flush()
        secure = False
        while True:
            line = f.readline()
            if not line:
                return
            cmd = line.decode("utf-8", "replace").strip().upper()
            if cmd.startswith("EHLO"):
                f.write(b"250-mail.test\r\n250 " + (b"AUTH PLAIN" if secure else b"STARTTLS") + b"\r\n")
            elif cmd == "STARTTLS" and not secure:
                f.write(b"220 go ahead\r\n")
                f.flush()
                sock = tls.wrap_socket(sock, server_side=True)
                f = sock.makefile("rwb")
                secure = True
                continue
            elif cmd == "DATA":
                f.write(b"354 end with .\r\n")
                f.flush()
                while f.readline() not in (b".\r\n", b""):
                    pass
                f.write(b"250 queued (tls=%d)\r\n" % secure)
            elif cmd == "QUIT":
                f.write(b"221 bye\r\n")
                f.flush()
                return
            else:
                f.write(b"250 ok\r\n")
            f.flush()


class Drain(socketserver.BaseRequestHandler):
    """Reads to the client's end (its half-close), then answers how many
    bytes came and their hash, and closes: a relay must pass the half-close
    on and still carry the answer back."""

    def handle(self):
        h, n = hashlib.sha256(), 0
        while True:
            b = self.request.recv(65536)
            if not b:
                break
            h.update(b)
            n += len(b)
        self.request.sendall(b"got %d %s\n" % (n, h.hexdigest().encode()))


class Tcp(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def start(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


http_srv = Server(("127.0.0.1", 0), Echo)
https_srv = Server(("127.0.0.1", 0), Echo)
https_srv.socket = tls.wrap_socket(https_srv.socket, server_side=True)
# another server for the name with L7 rules: rules follow the address and
# port, so a spliced name must not share them
https2_srv = Server(("127.0.0.1", 0), Echo)
https2_srv.socket = tls.wrap_socket(https2_srv.socket, server_side=True)
ports = {
    "http": start(http_srv),
    "https": start(https_srv),
    "https2": start(https2_srv),
    "imaps": start(Tcp(("127.0.0.1", 0), Imap)),
    "smtp": start(Tcp(("127.0.0.1", 0), Smtp)),
    "drain": start(Tcp(("127.0.0.1", 0), Drain)),
}
# a port nothing allows: the test connects to it on a synthetic address
spare = socket.socket()
spare.bind(("127.0.0.1", 0))
ports["spare"] = spare.getsockname()[1]
print(json.dumps(ports), flush=True)
threading.Event().wait()
