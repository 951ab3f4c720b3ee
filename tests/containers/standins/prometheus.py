"""Stands in for the Prometheus image in the compose check: answers its readiness endpoint on 9090
(the check needs the telemetry profile's services up, not a time-series database). Its arguments
are accepted and ignored."""
from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Ready(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"Prometheus Server is Ready.\n")


if __name__ == "__main__":
    ThreadingHTTPServer(("0.0.0.0", 9090), Ready).serve_forever()
