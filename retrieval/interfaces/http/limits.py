"""How ``retrieval serve`` bounds its work, so that no client, and no crowd of them, takes the server from the rest.

- **Connections** cost nothing until they ask: a client has ``header_timeout`` seconds after it connects (or after
  its previous response) to send a request's head, else the connection is closed; an idle keep-alive connection
  is closed after ``KEEP_ALIVE`` seconds. Sockets that never send a request therefore never count against
  requests, and beyond ``MAX_CONNECTIONS`` open at once a new one is answered a JSON 503 and closed.
- **Requests in flight** are counted, not connections: beyond ``max_requests`` a request is answered at once with
  a JSON 503 (``kind`` ``OverloadedError``) and ``Retry-After``, the documented error shape.
- **Slow endpoints** (``similar``, paper pages, ``explain``, ``stats``: a hub paper's co-citations can take
  seconds) run on a thread pool of their own, ``SLOW_THREADS`` wide, and at most ``SLOW_REQUESTS`` of them are
  admitted at once; searches keep the default pool (``SEARCH_THREADS``). A burst of hub requests then queues
  behind itself, not in front of the searches (``bench/serve.py --load`` measures it).
- **Bodies** are read within ``BODY_TIMEOUT`` seconds (``retrieval.interfaces.http.app``'s guard).
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Callable

from ...errors import OverloadedError

#: Threads that answer searches (each with its own read-only connection to the index).
SEARCH_THREADS = 6
#: Threads that answer the slow endpoints: ``similar``, paper pages, ``explain``, ``stats``.
SLOW_THREADS = 2
#: Requests in flight (all endpoints) before the next one is answered 503 (``retrieval serve --max-requests``).
MAX_REQUESTS = 64  # retrieval.interfaces.cli.serve repeats it: its --help needs no uvicorn
#: Requests to slow endpoints admitted at once (running or waiting for a thread); beyond, 503.
SLOW_REQUESTS = 16
#: Seconds a connection may take to send a request's head (``retrieval serve --header-timeout``).
HEADER_TIMEOUT = 10.0  # likewise
#: Seconds a request's body may take to arrive.
BODY_TIMEOUT = 30.0
#: Bytes of a request's head (its line and headers) read before it is refused. A GET's query string must hold a
#: query of the documented length percent-encoded, up to 12 bytes a character; h11's default (16 KiB), reached
#: once a head arrives in pieces, refused a Greek or Chinese abstract of about 2,700 characters with plain text.
MAX_HEAD_BYTES = 512 * 1024
#: Seconds an idle keep-alive connection stays open.
KEEP_ALIVE = 5.0
#: Connections open at once before a new one is refused (a file descriptor each).
MAX_CONNECTIONS = 1024
#: Seconds, after a stop's grace period, that interrupted requests get to be answered before the server exits.
STOP_WAIT = 2.0
#: Seconds a client is asked to wait before it retries a refused request.
RETRY_AFTER = 1


def overloaded_body(what: str) -> bytes:
    """The JSON body of a 503 for overload: ``{"error", "kind"}`` as every error."""
    message = f"the server is busy ({what}): retry in {RETRY_AFTER} s"
    return json.dumps({"error": message, "kind": OverloadedError.__name__}, separators=(",", ":")).encode()


class Limits:
    """The counters and the slow endpoints' pool of one application. The event loop is one thread, so the counts
    need no lock; the pool (an anyio ``CapacityLimiter``) is made in the loop that first uses it, one per loop."""

    def __init__(self, max_requests: int = MAX_REQUESTS, slow_requests: int = SLOW_REQUESTS) -> None:
        self.max_requests = max_requests
        self.slow_requests = slow_requests
        self.in_flight = 0
        self.slow_in_flight = 0
        self.stopping = False  # set once the server's stop has ended its grace period
        self._pools: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _pool(self):
        import asyncio

        from anyio import CapacityLimiter

        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            pool = self._pools[loop] = CapacityLimiter(SLOW_THREADS)
        return pool

    def slow(self, fn: Callable) -> Callable:
        """``fn`` (a plain route function) run on the slow endpoints' pool, refused with ``OverloadedError``
        when ``slow_requests`` are already admitted. The signature is ``fn``'s, so FastAPI reads the same
        parameters."""
        from anyio import to_thread

        @functools.wraps(fn)
        async def run(*args, **kwargs):
            if self.slow_in_flight >= self.slow_requests:
                raise OverloadedError(
                    f"the server is busy ({self.slow_requests} slow requests in flight): retry in {RETRY_AFTER} s"
                )
            self.slow_in_flight += 1
            try:
                return await to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=self._pool())
            finally:
                self.slow_in_flight -= 1

        return run


def connection_class(header_timeout: float = HEADER_TIMEOUT, max_connections: int = MAX_CONNECTIONS):
    """uvicorn's h11 protocol with a deadline for each request's head and a cap on open connections (given to
    ``uvicorn.Config(http=...)``). uvicorn's own ``limit_concurrency`` counts idle sockets as requests and answers
    plain text beyond it, so it is not used."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    refusal = overloaded_body(f"more than {max_connections} connections open")
    refused = (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(refusal)}\r\nretry-after: {RETRY_AFTER}\r\nconnection: close\r\n\r\n".encode()
        + refusal
    )

    class Connection(H11Protocol):
        """One client connection: closed when no request head arrives within ``header_timeout`` seconds."""

        _deadline = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.write(refused)
                transport.close()
                return
            self._await_request()

        def on_response_complete(self) -> None:
            self._await_request()  # before: a pipelined request starts a new cycle inside the call
            super().on_response_complete()

        def connection_lost(self, exc) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _await_request(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            waiting_after = self.cycle  # a new request replaces it

            def expire() -> None:
                if self.cycle is waiting_after and not self.transport.is_closing():
                    self.transport.close()

            self._deadline = self.loop.call_later(header_timeout, expire)

    return Connection
