"""An OTLP/HTTP trace receiver: decodes what it is sent with the official OpenTelemetry protobuf
definitions (PyPI `opentelemetry-proto`) and writes each span as one JSON line.

Usage: receiver.py OUT_FILE. Listens on 127.0.0.1 on a free port, prints `PORT` on its first
line, and serves until killed. Each span: name, trace and span ids (hex), parent span id,
attributes (key -> string, int, bool or double), status code (0 unset, 1 ok, 2 error), and
the resource's attributes.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        with open(sys.argv[1], "a", encoding="utf-8") as out:
            for resource_spans in request.resource_spans:
                resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.write(
                            json.dumps(
                                {
                                    "name": span.name,
                                    "trace_id": span.trace_id.hex(),
                                    "span_id": span.span_id.hex(),
                                    "parent_span_id": span.parent_span_id.hex(),
                                    "attributes": {a.key: value(a.value) for a in span.attributes},
                                    "status": span.status.code,
                                    "resource": resource,
                                }
                            )
                            + "\n"
                        )
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *_args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
