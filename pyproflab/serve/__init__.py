"""``pyproflab serve``: receive the profiles fleets' SDKs push, never losing one it acknowledged.

- ``server``: the HTTP server (dd-trace-go's and pyroscope-go's pushes in,
  spool files out; a push is acknowledged only once durable);
- ``guard``: tokens, per-client rate, connection deadlines;
- ``telemetry``: its own metrics on ``/metrics``;
- ``ingester``: spool files into the store in batches, holding the store's
  lock only while a batch is written;
- ``run``: the server with its ingester beside it, in a child process it
  restarts if it dies.

The protocols and the spool are sources (``sources.push``, ``sources.spool``).
"""
