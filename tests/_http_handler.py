"""A quiet HTTP/1.1 request handler base for the tests' local servers."""

from __future__ import annotations

import http.server


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """No access log; ``_send`` answers with a body and its Content-Length."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
