"""A webhook receiver for end-to-end tests, and the signature check a customer writes."""
import hashlib
import hmac
import http.server
import json
import queue
import threading
import time


class Receiver:
    """A webhook receiver: an HTTP server on loopback in a thread that answers each POST
    with the next of ``answers`` (the last one from then on), or holds it until
    :meth:`release` when the answer is ``"hang"``; every request lands in :attr:`got`."""

    def __init__(self, answers=(200,), port=0):
        self.answers, self.got = list(answers), queue.Queue()
        self.last = None  # (headers, body) of the last request :meth:`events` read
        self.released = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.got.put((dict(self.headers), body, time.monotonic()))
                answer = receiver.answers.pop(0) if len(receiver.answers) > 1 \
                    else receiver.answers[0]
                if answer == "hang":
                    receiver.released.wait(60)
                    answer = 200
                self.send_response(answer)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/cdnaas"

    def next(self, timeout=30):
        """``(headers, body bytes, when)`` of the next request received."""
        return self.got.get(timeout=timeout)

    def events(self, vcdn_id, timeout=30, until=None):
        """The events received about ``vcdn_id`` until ``until(events)`` holds (or one)."""
        found, deadline = [], time.monotonic() + timeout
        while not (until or bool)(found):
            headers, body, _ = self.got.get(timeout=max(0.1, deadline - time.monotonic()))
            self.last = (headers, body)
            event = json.loads(body)
            if event["vcdn_id"] == vcdn_id:
                found.append(event)
        return found

    def release(self):
        self.released.set()

    def close(self):
        self.release()
        self.server.shutdown()
        self.server.server_close()


def signed_by(secret, headers, body):
    """Whether ``CDNaaS-Signature`` is HMAC-SHA256 over ``"<t>.<body>"`` with ``secret``
    (written here from the documentation, not with the service's own code)."""
    fields = dict(part.split("=", 1) for part in headers["CDNaaS-Signature"].split(","))
    mac = hmac.new(secret.encode(), fields["t"].encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest(mac.hexdigest(), fields["v1"]) \
        and abs(time.time() - int(fields["t"])) < 300
