"""Log collectors for the log-stream tests and benchmark: a TCP (or TLS) syslog server and
an NDJSON HTTP server, each in a thread, keeping what they receive."""
import contextlib
import http.server
import json
import socket
import socketserver
import threading
import time


class SyslogCollector:
    """A TCP (or TLS) syslog server in a thread: octet-counted frames into ``messages``."""

    def __init__(self, port=0, context=None, host="0.0.0.0"):
        self.messages, self.connections = [], []
        collector = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                stream = self.rfile
                while True:
                    length = b""
                    while not length.endswith(b" "):
                        byte = stream.read(1)
                        if not byte:
                            return
                        length += byte
                    collector.messages.append(stream.read(int(length)))

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

            def get_request(self):
                sock, peer = super().get_request()
                collector.connections.append(sock)
                return (context.wrap_socket(sock, server_side=True) if context else sock), peer

        self.server = Server((host, port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def records(self):
        """The MSG (a usage record) of each message received."""
        return [json.loads(m.split(b" - - - ", 1)[1]) for m in list(self.messages)]

    def close(self):
        """Stop listening and reset every connection (as a collector that dies)."""
        self.server.shutdown()
        self.server.server_close()
        for connection in self.connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()


class HttpCollector:
    """An HTTP server in a thread taking NDJSON POSTs into ``records`` and ``headers``."""

    def __init__(self, host="0.0.0.0"):
        self.records, self.headers = [], []
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                collector.headers.append(dict(self.headers))
                collector.records += [json.loads(line) for line in body.splitlines()]
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_args):
                pass
        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def wait_for(check, timeout=20.0):
    """Poll ``check()`` until true; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
