# A tiny webhook receiver for docker-compose.yml: prints each request's signature
# headers and body, and answers 204.
from http.server import BaseHTTPRequestHandler, HTTPServer


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        print(
            self.path,
            self.headers.get("X-Event-Type"),
            self.headers.get("webhook-id"),
            self.headers.get("webhook-signature"),
            body.decode("utf-8", "replace"),
        )
        self.send_response(204)
        self.end_headers()


HTTPServer(("0.0.0.0", 8080), Receiver).serve_forever()
