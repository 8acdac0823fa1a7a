"""The ``retrieval serve`` subcommand: the JSON API (``retrieval.interfaces.http.app``) on uvicorn, one process,
read-only.

The main CLI imports this module only when ``retrieval serve`` runs and calls ``add_arguments`` on the subcommand's
parser; FastAPI and uvicorn are imported only once the options are parsed, so a missing ``serve`` extra is a
message (exit 1), not a traceback. The index is opened and checked before the port is taken: a server that says
it serves is a server whose index opens.

The socket is bound here rather than by uvicorn, so the URL printed is the one really served (``--port 0``: a free
port the system picks) and a port in use is a one-line error. Loopback by default; any other address gets a
warning, since the index is then open to the network. Each request is one log line on stderr (uvicorn's own
access log is off; its warnings and errors stay). How many requests it admits, and how long a client may take to
ask, are ``retrieval.interfaces.http.limits`` (``--max-requests``, ``--header-timeout``). Ctrl-C or SIGTERM stop
it: uvicorn stops accepting, lets the requests in flight finish (at most ``--grace`` seconds), the reads still
running then are interrupted and answered 503 (``ServerStopping``), and the command exits 0 with
``retrieval: stopped``.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import logging
import socket
import sys

from ...errors import RetrievalError
from .options import DB_HELP, add_query_timeout, index_location, seconds

# The limits' defaults, as plain numbers: ``retrieval.interfaces.http.limits`` needs uvicorn, and
# ``retrieval serve --help`` works without the serve extra.
MAX_REQUESTS = 64
HEADER_TIMEOUT = 10.0

#: Seconds that requests in flight get to finish once a stop is asked for.
GRACE = 5.0


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535 (0: any free port), got {value}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"expected a number from 1 to 100000, got {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``retrieval serve`` on its parser ``p``."""
    p.description = (
        "Serve the index over HTTP: a JSON API (/search, /similar/ID, /papers/ID, POST /explain, /stats, /health; "
        "described at /openapi.json). Read-only. Needs the serve extra: pip install 'retrieval[serve]'."
    )
    p.add_argument("--db", type=index_location, help=DB_HELP)
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 opens it to the network)",
    )
    p.add_argument("--port", type=_port, default=8000, help="port (default 8000; 0: any free port, printed)")
    p.add_argument(
        "--max-requests",
        type=_count,
        default=MAX_REQUESTS,
        help=f"requests in flight before the next is answered 503 with Retry-After (default {MAX_REQUESTS}; idle "
        "connections do not count)",
    )
    p.add_argument(
        "--header-timeout",
        type=seconds,
        default=HEADER_TIMEOUT,
        metavar="SECONDS",
        help=f"close a connection that sends no request within this time (default {HEADER_TIMEOUT:g})",
    )
    p.add_argument(
        "--grace",
        type=seconds,
        default=GRACE,
        metavar="SECONDS",
        help=f"on Ctrl-C or SIGTERM, time the requests in flight get to finish (default {GRACE:g}); those still "
        "running then are answered 503",
    )
    add_query_timeout(p)
    p.set_defaults(func=_cmd_serve)


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (SO_REUSEADDR, as uvicorn's own), or a ``RetrievalError`` saying why not."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise RetrievalError(
            f"--host {host!r} is not an address here ({exc.strerror}): give one such as 127.0.0.1"
        ) from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        hint = {
            errno.EADDRINUSE: f"another program listens on port {port}: choose another with --port (0: any free one)",
            errno.EACCES: "ports below 1024 need privileges: choose another with --port, such as 8000",
            errno.EADDRNOTAVAIL: "this machine has no such address: give one of its own, such as 127.0.0.1",
        }.get(exc.errno, "check --host and --port")
        raise RetrievalError(f"cannot listen on {host}:{port}: {exc.strerror}; {hint}") from None
    sock.set_inheritable(True)
    return sock


def is_loopback(address: str) -> bool:
    """Whether a bound address (``127.0.0.1``, ``::1``, ``0.0.0.0``) is reachable from this machine only."""
    return ipaddress.ip_address(address.split("%")[0]).is_loopback


def url_of(sock: socket.socket) -> str:
    """The URL a listening socket serves: ``http://127.0.0.1:8000/`` (the port the system gave, for port 0)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _log_to_stderr() -> None:
    """Our request lines (INFO) and uvicorn's warnings and errors, one line each on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    for name, level in (("retrieval.serve", logging.INFO), ("uvicorn", logging.WARNING)):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from ..http import limits
        from ..http.app import create_app
    except ImportError as exc:
        raise RetrievalError(
            f"retrieval serve needs FastAPI and uvicorn ({exc.name or exc} is not installed): "
            "install retrieval[serve] (pip install 'retrieval[serve]')"
        ) from None
    from ..service import Service

    service = Service(args.db, args.query_timeout)  # a missing or unreadable index stops here, not once serving
    try:
        sock = _listen(args.host, args.port)
        url = url_of(sock)
        if not is_loopback(sock.getsockname()[0]):
            print(
                f"retrieval: warning: listening on {args.host}: the index is then reachable from the network, by "
                "anyone who can reach this port (there is no authentication); the default, 127.0.0.1, keeps it on "
                "this machine",
                file=sys.stderr,
            )
        _log_to_stderr()
        config = uvicorn.Config(
            create_app(service, limits.Limits(max_requests=args.max_requests)),
            http=limits.connection_class(header_timeout=args.header_timeout),
            log_config=None,
            access_log=False,
            limit_concurrency=None,  # it would count idle sockets: the limits are the app's and the protocol's
            timeout_keep_alive=limits.KEEP_ALIVE,
            h11_max_incomplete_event_size=limits.MAX_HEAD_BYTES,
            timeout_graceful_shutdown=args.grace,
            lifespan="on",
            server_header=False,
        )
        server = uvicorn.Server(config)
        where = getattr(service.path, "shown", service.path)  # a server URL without its password
        print(f"retrieval: serving {where} on {url} (API: {url}openapi.json; Ctrl-C stops)", flush=True)
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:  # uvicorn stopped on SIGINT or SIGTERM, then raised the signal again
            pass
        finally:
            sock.close()
        if not server.started:
            raise RetrievalError("the server did not start: the messages above say why")
    finally:
        service.close()
    print("retrieval: stopped", file=sys.stderr, flush=True)
    _leave_unfinished_reads()
    return 0


def _leave_unfinished_reads(wait: float = 1.0) -> None:
    """Exit now if a thread still runs a read its request no longer waits for (one that cannot be interrupted,
    such as a connection still opening behind a lock): every request has had its answer, and the interpreter
    would otherwise wait for that read to end, however long it takes."""
    import os
    import threading
    import time

    deadline = time.monotonic() + wait
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
