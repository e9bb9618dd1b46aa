#!/usr/bin/env python3
"""moto's emulator served with HTTP keep-alive (as AWS serves; moto_server closes every
connection) and a request counter in front of it, for the benchmarks. Every peer measured in
one run talks to this same server.

GET  /_bench/counts  -> {"dynamodb.GetItem": n, "dynamodb.GetItem.gate": n, "sqs.ReceiveMessage": n, ...}
POST /_bench/counts  -> the same, then reset to zero

usage: moto_counting.py PORT
"""
import json
import sys
import threading
from collections import Counter

import waitress
from moto.server import DomainDispatcherApplication, create_backend_app

COUNTS = Counter()
LOCK = threading.Lock()


def operation(environ, body):
    """(service, operation) of one AWS request: JSON protocols name it in X-Amz-Target, the
    query protocol in Action."""
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target.startswith("DynamoDB_"):
        return "dynamodb", target.split(".", 1)[1]
    if target.startswith("AmazonSQS."):
        return "sqs", target.split(".", 1)[1]
    if b"Action=" in body:
        action = body.split(b"Action=", 1)[1].split(b"&", 1)[0].decode()
        return "query", action
    return "other", environ.get("PATH_INFO", "?")


def counting(app):
    def wrapped(environ, start_response):
        if environ.get("PATH_INFO") == "/_bench/counts":
            with LOCK:
                snapshot = dict(COUNTS)
                if environ["REQUEST_METHOD"] == "POST":
                    COUNTS.clear()
            payload = json.dumps(snapshot).encode()
            start_response("200 OK", [("Content-Type", "application/json"),
                                      ("Content-Length", str(len(payload)))])
            return [payload]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        service, op = operation(environ, body)
        with LOCK:
            COUNTS[f"{service}.{op}"] += 1
            # Gate items live in the deliveries table under gate#<channel>#<partition>.
            if service == "dynamodb" and b'"gate#' in body:
                COUNTS[f"{service}.{op}.gate"] += 1
        import io
        environ["wsgi.input"] = io.BytesIO(body)
        return app(environ, start_response)
    return wrapped


if __name__ == "__main__":
    app = counting(DomainDispatcherApplication(create_backend_app))
    waitress.serve(app, host="127.0.0.1", port=int(sys.argv[1]), threads=8, _quiet=True)
