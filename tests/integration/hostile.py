"""A tiny HTTP server on loopback that answers as something other than umd would: a reverse
proxy's HTML error page, a JSON document of the wrong shape, garbage, a server that accepts the
connection and never answers, one that trickles its answer a byte at a time. It is no umd and
says so: the tests point umdctl and umd-healthcheck at it to see that none of this is taken for
a verdict.

    with Hostile(lambda req: (503, "text/html", b"<html>...")) as h:
        run umdctl --url h.url ...

The handler gets a Request (method, path with its query, body) and returns (status,
content_type or None, body bytes or str or a JSON-able object), or one of HANG (hold the
connection, answer nothing), TRICKLE (a status line, then a header byte every half second,
never done) or CLOSE (close without a word). Requests are recorded in .requests."""
import json
import socket
import threading
import time
import uuid

HANG, TRICKLE, CLOSE = "hang", "trickle", "close"
REASONS = {200: "OK", 202: "Accepted", 404: "Not Found", 502: "Bad Gateway",
           503: "Service Unavailable"}


class Request:
    def __init__(self, method, path, body):
        self.method, self.path, self.body = method, path, body

    def json(self):
        return json.loads(self.body or b"null")


class Hostile:
    def __init__(self, handler):
        self.handler = handler
        self.requests = []
        self.stopping = threading.Event()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(5)
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass
        self.sock.close()

    def _serve(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _read_request(self, conn):
        data = b""
        conn.settimeout(10)
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        length = 0
        for line in lines[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v.strip())
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return Request(method, path, body)

    def _one(self, conn):
        try:
            while not self.stopping.is_set():
                req = self._read_request(conn)
                if req is None:
                    return
                self.requests.append(req)
                what = self.handler(req)
                if what == HANG:
                    self.stopping.wait()
                    return
                if what == CLOSE:
                    return
                if what == TRICKLE:
                    conn.sendall(b"HTTP/1.1 200 OK\r\n")
                    while not self.stopping.wait(0.5):
                        conn.sendall(b"X")
                    return
                status, ctype, body = what
                if not isinstance(body, (bytes, str)):
                    body = json.dumps(body)
                if isinstance(body, str):
                    body = body.encode()
                head = f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}\r\n"
                if ctype:
                    head += f"Content-Type: {ctype}\r\n"
                head += f"Content-Length: {len(body)}\r\n\r\n"
                conn.sendall(head.encode() + body)
        except OSError:
            return
        finally:
            try:
                conn.close()
            except OSError:
                pass


# -- documents in umd's shape (api/openapi.json), for handlers that answer like umd --

UUID0 = "GPU-fa4e0000-0000-4000-8000-000000000000"


def job_id():
    return str(uuid.uuid4())


def part(device=0, state="succeeded", verdict="pass", reasons=(), error=None):
    p = {"device": device, "uuid": UUID0 if device != "all" else "node", "state": state,
         "error": error}
    if verdict is not None:
        p["verdict"] = {"verdict": verdict, "reasons": list(reasons)}
    return p


def job(jid, state="succeeded", parts=None, benchmark="health"):
    return {"id": jid, "benchmark": benchmark, "kind": "suite", "params": {}, "state": state,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "parts": parts if parts is not None else [part()]}


def accepted_then_hanging(jid):
    """A handler that accepts the canonical check (202, its part queued) and then never answers
    again: the wait for a verdict must end by itself."""
    def handler(req):
        if req.method == "POST":
            return (202, "application/json", job(jid, state="queued",
                                                  parts=[part(state="queued", verdict=None)]))
        return HANG
    return handler


def device(index=0, name="NVIDIA H200 (fake)", paused=False, last_health=None):
    return {"uuid": UUID0[:-1] + str(index), "index": index, "name": name,
            "state": "paused" if paused else "idle", "fake": True, "warm": False,
            "paused": paused, "pause_reason": None, "last_health": last_health}


def problem(status, detail, field=None):
    body = {"type": "https://umd.dev/problems/unavailable", "title": "Service Unavailable",
            "status": status, "detail": detail}
    if field:
        body["field"] = field
    return (status, "application/problem+json", body)


# -- hostile clients: connections that hold a slot and never finish a request --

class SlowClients:
    """n connections from source address src to (host, port), each sending a request's headers
    a byte every half second and never ending them (the slow-loris attack): every one holds a
    connection slot until the server cuts it. .open counts those the server still holds (a
    send that fails means it was cut or refused).

        with SlowClients("127.0.0.2", ("127.0.0.1", port), 64) as s:
            ...
    """

    def __init__(self, src, addr, n):
        self.src, self.addr, self.n = src, addr, n
        self.socks = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)

    def __enter__(self):
        for _ in range(self.n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((self.src, 0))
            s.settimeout(5)
            s.connect(self.addr)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            self.socks.append(s)
        self.thread.start()
        return self

    def _trickle(self):
        while not self.stopping.wait(0.5):
            for s in self.socks:
                try:
                    s.sendall(b"x")
                except OSError:
                    pass

    @property
    def open(self):
        """The connections the server has not closed: a closed one reads EOF or an error."""
        n = 0
        for s in self.socks:
            try:
                s.setblocking(False)
                n += 0 if s.recv(1) == b"" else 1
            except BlockingIOError:
                n += 1
            except OSError:
                pass
            finally:
                s.setblocking(True)
                s.settimeout(5)
        return n

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(5)
        for s in self.socks:
            s.close()
