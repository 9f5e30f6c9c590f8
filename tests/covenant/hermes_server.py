#!/usr/bin/env python3
"""A small Hermes-compatible gateway for tests/covenant (the /v1/runs surface
covenant-runtime's HermesRunner drives): POST /v1/runs, GET /v1/runs/{id},
GET /v1/runs/{id}/events (SSE), POST /v1/runs/{id}/stop, POST
/v1/runs/{id}/approval. What a run does is chosen by its input's first word:
  plain      completes after a few polls; SSE: tool.started/completed read_file
  terminal   SSE: tool.started for the tool "terminal", then keeps running
  slow       runs until stopped
  dropsse    the event stream closes at once; completes on polling
  chunked    as plain, the event stream chunked (Transfer-Encoding) with CRLF
             frames and a tool.completed split across two chunks
  garbage    GET /runs/{id} answers text that is not JSON
  fail500    POST /runs answers 500
  hang       POST /runs never answers
  approval   SSE: approval.request (choices once, session, deny); completes
             with "approved: CHOICE" once answered
  twice      two approval requests, one after the other; completes with both
GET /debug/log lists what the server saw (stops, approvals, keys, headers).
With HERMES_TEST_KEY set, requests without "Authorization: Bearer KEY" get 401.
With HERMES_TEST_TLS_CERT and HERMES_TEST_TLS_KEY (PEM files) it serves HTTPS;
with HERMES_TEST_TLS_CLIENT_CA too, only to clients with a certificate that CA
signed (mutual TLS).
Prints the port it listens on (127.0.0.1), then serves until killed."""
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RUNS = {}
LOG = []
LOCK = threading.Lock()
KEY = os.environ.get("HERMES_TEST_KEY")


def log(entry):
    with LOCK:
        LOG.append(entry)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        if KEY and self.headers.get("Authorization") != "Bearer " + KEY:
            self.reply(401, {"error": "unauthorized"})
            return False
        return True

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def do_POST(self):
        if not self.authorized():
            return
        parts = self.path.strip("/").split("/")
        if parts == ["v1", "runs"]:
            req = self.body()
            mode = (req.get("input") or "").split(" ")[0]
            log({"post": "runs", "idempotency_key": self.headers.get("Idempotency-Key"),
                 "session_id": req.get("session_id"), "input": req.get("input"),
                 "authorization": self.headers.get("Authorization")})
            if mode == "fail500":
                return self.reply(500, "boom: the gateway broke")
            if mode == "hang":
                time.sleep(3600)
            run_id = "run-" + uuid.uuid4().hex[:12]
            with LOCK:
                RUNS[run_id] = {"mode": mode, "input": req.get("input"), "polls": 0,
                                "status": "running", "choices": []}
            return self.reply(202, {"run_id": run_id, "status": "queued"})
        if len(parts) == 4 and parts[:2] == ["v1", "runs"] and parts[3] in ("stop", "approval"):
            run = RUNS.get(parts[2])
            if not run:
                return self.reply(404, {"error": "no such run"})
            if parts[3] == "stop":
                log({"stop": parts[2], "input": run["input"]})
                run["status"] = "cancelled"
                return self.reply(200, {"status": "stopping"})
            choice = self.body().get("choice")
            log({"approval": parts[2], "choice": choice, "input": run["input"]})
            run["choices"].append(choice)
            return self.reply(200, {"resolved": 1})
        self.reply(404, {"error": "not found"})

    def do_GET(self):
        if self.path == "/debug/log":
            with LOCK:
                return self.reply(200, LOG)
        if not self.authorized():
            return
        parts = self.path.strip("/").split("/")
        if len(parts) >= 3 and parts[:2] == ["v1", "runs"] and parts[2] in RUNS:
            run = RUNS[parts[2]]
            if len(parts) == 4 and parts[3] == "events":
                return self.events(parts[2], run)
            return self.status(run)
        self.reply(404, {"error": "not found"})

    def status(self, run):
        run["polls"] += 1
        mode = run["mode"]
        if mode == "garbage":
            return self.reply(200, "<html>this is not JSON</html>", "text/html")
        if run["status"] == "cancelled":
            return self.reply(200, {"status": "cancelled"})
        done = None
        if mode in ("plain", "dropsse", "chunked") and run["polls"] >= 3:
            done = "done: " + run["input"]
        if mode == "approval" and run["choices"]:
            done = "approved: " + run["choices"][0]
        if mode == "twice" and len(run["choices"]) >= 2:
            done = "answers: " + ",".join(run["choices"])
        if done is not None:
            return self.reply(200, {"status": "completed", "output": done})
        state = "waiting_for_approval" if mode in ("approval", "twice") else "running"
        return self.reply(200, {"status": state})

    def send_event(self, event):
        self.wfile.write(b": keepalive\n\n")
        self.wfile.write(("data: " + json.dumps(event) + "\n\n").encode())
        self.wfile.flush()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def chunked_events(self, run_id):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        started = {"event": "tool.started", "run_id": run_id, "tool": "read_file",
                   "preview": "notes.txt"}
        done = ("data: " + json.dumps({"event": "tool.completed", "run_id": run_id,
                                       "tool": "read_file", "duration": 1.5, "error": True})
                + "\r\n\r\n").encode()
        self.chunk(b": keepalive\r\n\r\n")
        self.chunk(("data: " + json.dumps(started) + "\r\n\r\n").encode())
        self.chunk(done[:20])
        time.sleep(0.2)
        self.chunk(done[20:])
        self.chunk(b"")

    def events(self, run_id, run):
        mode = run["mode"]
        if mode == "chunked":
            return self.chunked_events(run_id)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        if mode == "dropsse":
            return
        try:
            if mode == "plain":
                self.send_event({"event": "tool.started", "run_id": run_id, "tool": "read_file",
                                 "preview": "README.md"})
                self.send_event({"event": "tool.completed", "run_id": run_id,
                                 "tool": "read_file", "duration": 0.25, "error": False})
                self.send_event({"event": "run.completed", "run_id": run_id})
            elif mode == "terminal":
                self.send_event({"event": "tool.started", "run_id": run_id, "tool": "terminal",
                                 "preview": "rm -rf /"})
            elif mode in ("approval", "twice"):
                for i in range(2 if mode == "twice" else 1):
                    self.send_event({"event": "approval.request", "run_id": run_id,
                                     "choices": ["once", "session", "deny"]})
                    while len(run["choices"]) <= i and run["status"] != "cancelled":
                        time.sleep(0.05)
                self.send_event({"event": "run.completed", "run_id": run_id})
            while run["status"] == "running" and mode in ("terminal", "slow", "plain"):
                time.sleep(0.1)
                if mode == "plain":
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
if os.environ.get("HERMES_TEST_TLS_CERT"):
    import ssl
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(os.environ["HERMES_TEST_TLS_CERT"], os.environ["HERMES_TEST_TLS_KEY"])
    if os.environ.get("HERMES_TEST_TLS_CLIENT_CA"):
        tls.verify_mode = ssl.CERT_REQUIRED
        tls.load_verify_locations(os.environ["HERMES_TEST_TLS_CLIENT_CA"])
    server.socket = tls.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
