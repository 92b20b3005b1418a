# What test/http/http_test.py drives the example services with (Python standard library):
# the service and fault-proxy processes, one HTTP request on a fresh connection, a request
# retried until a complete answer arrives, the Standard Webhooks signature, the result table.
import base64
import hashlib
import hmac
import http.client
import os
import random
import signal
import subprocess
import threading
import time


class Process:
    """A child process in its own process group whose stdout is read by a thread; start() waits
    for its "listening on 127.0.0.1:N" line."""

    def __init__(self, name, argv, env=None, log=None):
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self.proc, self.lines, self.port = None, [], None
        self._ready = threading.Event()

    def start(self, timeout=60):
        self._ready.clear()
        self.lines, self.port = [], None
        errors = open(self.log, "ab") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.PIPE,
                                     stderr=errors, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(timeout) or self.port is None:
            self.kill()
            tail = ""
            if self.log and os.path.exists(self.log):
                with open(self.log, "rb") as f:
                    tail = f.read()[-1500:].decode(errors="replace")
            raise RuntimeError(f"{self.name} did not print 'listening on' within {timeout} s "
                               f"(exit {self.proc.returncode}); its output: {self.lines[-5:]} "
                               f"{tail}")
        return self

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if line.startswith("listening on 127.0.0.1:") and not self._ready.is_set():
                self.port = int(line.rsplit(":", 1)[1])
                self._ready.set()
        self._ready.set()  # end of its output: the process is gone (or closed its stdout)

    def kill(self, sig=signal.SIGKILL):
        """Sends sig to the whole process group (a service started by a wrapper script too) and
        waits for the process."""
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
        if self.proc:
            self.proc.wait()

    def stop(self):
        """SIGTERM, then the last line the process printed (fault_proxy's counters)."""
        self.kill(signal.SIGTERM)
        time.sleep(0.1)
        return self.lines[-1] if self.lines else ""


class Answer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        return self.headers.get(name.lower())


def request(port, method, path, body=b"", headers=None, timeout=15):
    """One request on a new connection (Connection: close); the complete Answer, or an exception
    (cut connection, incomplete body, timeout). An answer must be framed by Content-Length or
    chunked encoding, or a cut inside the body would pass for a complete answer."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Connection": "close"}
        if body:
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        if "content-length" not in hdrs and "chunked" not in hdrs.get("transfer-encoding", ""):
            raise ValueError("answer without Content-Length or chunked encoding")
        return Answer(r.status, hdrs, data)
    finally:
        c.close()


class Tries:
    """Counters of the retrying clients of one scenario."""

    def __init__(self):
        self.lock = threading.Lock()
        self.transport_errors = 0
        self.conflicts = 0  # 409 answers
        self.bad_retry_after = 0  # 409 without a whole-seconds Retry-After >= 1

    def add(self, **kw):
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)


def until_answered(port, path, body, headers, tries, deadline=60, backoff=0.02):
    """Sends the request until a complete answer other than 409 arrives (a new connection each
    try; transport errors: small backoff; 409: sleep its Retry-After). The answer."""
    end = time.monotonic() + deadline
    attempt = 0
    while time.monotonic() < end:
        attempt += 1
        try:
            a = request(port, "POST", path, body, headers)
        except (OSError, http.client.HTTPException, ValueError):
            tries.add(transport_errors=1)
            time.sleep(random.uniform(0.5, 1) * min(backoff * 2 ** min(attempt, 5), 0.5))
            continue
        if a.status != 409:
            return a
        ra = a.header("Retry-After") or ""
        ok = ra.isdigit() and int(ra) >= 1
        tries.add(conflicts=1, bad_retry_after=0 if ok else 1)
        time.sleep(min(int(ra), 5) if ok else 1)
    raise TimeoutError(f"no answer for {path} within {deadline} s")


def sign_standard(secret, msg_id, timestamp, payload):
    """The Standard Webhooks signature header value: v1,base64(HMAC-SHA256(key, id.ts.body)),
    the key being the base64 part of whsec_..."""
    key = base64.b64decode(secret.split("_", 1)[1])
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + payload, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


class Table:
    """The result table of one language and route: | check | expected | observed | result |."""

    def __init__(self, title):
        self.title, self.rows = title, []

    def check(self, name, expected, observed, ok=None):
        ok = (expected == observed) if ok is None else ok
        self.rows.append((name, str(expected), str(observed), "PASS" if ok else "FAIL"))
        return ok

    def failed(self):
        """The failed rows; a table without rows is one failure (its scenarios never ran)."""
        if not self.rows:
            return [("no checks ran", "", "", "FAIL")]
        return [r for r in self.rows if r[3] != "PASS"]

    def print(self):
        heads = ("check", "expected", "observed", "result")
        w = [max([len(h)] + [len(r[i]) for r in self.rows]) for i, h in enumerate(heads)]
        line = lambda r: "| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |"
        print(f"\n{self.title}")
        print(line(heads))
        print("|" + "|".join("-" * (x + 2) for x in w) + "|")
        for r in self.rows:
            print(line(r))
        passed = sum(r[3] == "PASS" for r in self.rows)
        print(f"{self.title}: {'PASS' if not self.failed() else 'FAIL'} "
              f"({passed} of {len(self.rows)} checks passed)", flush=True)
