"""HTTP for the fetchers: one client (httpx) with what every source needs to be a polite, robust caller.

- **Politeness**: at least ``interval`` seconds between the starts of two requests (arXiv asks for 3 s, Semantic
  Scholar grants a key 1 request a second), one connection at a time, a User-Agent that names the tool.
- **Rate limits**: a 429 (or a 503) waits what its ``Retry-After`` says (seconds or an HTTP date); without one, an
  exhausted daily budget (``X-RateLimit-Remaining: 0`` with ``X-RateLimit-Reset``, OpenAlex's headers) waits for
  the reset, and anything else backs off. A wait longer than ``max_wait`` is not slept through: the fetch stops
  with a message saying when to rerun it (it resumes).
- **Transient failures**: 5xx answers, timeouts, connections dropped or refused, a body cut off before its end and
  an answer the source's parser calls unusable (``Retry``: invalid JSON, arXiv's spurious empty pages) are tried
  again after ``backoff`` seconds, doubled each time up to ``backoff_cap``, with jitter (a factor from 0.5 to 1, so
  that clients that failed together do not retry together), at most ``tries`` times in all; a connection that
  cannot be made at all is tried at most ``CONNECT_TRIES`` times (an offline machine is told so in seconds).
- **Everything else** (400, 401, 403, 404, ...) is a ``FetchError`` at once, quoting the API's own message.

httpx rather than the standard library: a pooled keep-alive connection (thousands of requests to one host), a
timeout per phase (connect, read) and distinct exceptions for a refused connection, a timeout and a truncated body.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable
from datetime import datetime, timezone
from urllib.parse import urlsplit

import httpx

from ... import __version__
from ...errors import ConfigError, FetchError

#: Statuses worth another try: rate limited, and the server's passing failures.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Tries per request, the first included.
TRIES = 6
#: Tries of a connection that cannot be made at all (refused, no route, no name): an offline machine hears so fast.
CONNECT_TRIES = 3
#: Seconds a request may wait for each read (and a tenth of the connect phase's budget, at least 10 s).
TIMEOUT = 30.0
#: The first backoff (seconds), doubled per try up to ``BACKOFF_CAP``.
BACKOFF = 1.0
BACKOFF_CAP = 60.0
#: The longest wait a rate limit may ask for before the fetch stops instead (rerunning it resumes).
MAX_WAIT = 600.0
USER_AGENT = f"retrieval/{__version__} (literature-retrieval index; python-httpx)"


class Retry(Exception):
    """An answer that arrived whole but cannot be used (invalid JSON, an anomalous empty page): try again."""


class Policy:
    """How patient a fetch is: ``tries`` per request, the read ``timeout``, the ``backoff`` (first step) and its
    cap, the longest rate-limit wait it sleeps through (``max_wait``), and the ``interval`` between requests
    (None: the source's own)."""

    __slots__ = ("tries", "timeout", "backoff", "backoff_cap", "max_wait", "interval")

    def __init__(
        self,
        tries: int = TRIES,
        timeout: float = TIMEOUT,
        backoff: float = BACKOFF,
        backoff_cap: float = BACKOFF_CAP,
        max_wait: float = MAX_WAIT,
        interval: float | None = None,
    ) -> None:
        if tries < 1:
            raise ConfigError(f"tries must be at least 1, got {tries}")
        self.tries = tries
        self.timeout = timeout
        self.backoff = backoff
        self.backoff_cap = backoff_cap
        self.max_wait = max_wait
        self.interval = interval


class Stats:
    """What a session did: requests sent, tries repeated, seconds spent waiting (backoff and rate limits)."""

    __slots__ = ("requests", "retries", "waited")

    def __init__(self) -> None:
        self.requests = 0
        self.retries = 0
        self.waited = 0.0


def duration(seconds: float) -> str:
    """``seconds`` for a person: ``45 s``, ``12 min``, ``7 h 3 min``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def retry_after(response: httpx.Response, now: Callable[[], datetime] | None = None) -> float | None:
    """The wait a 429 or 503 asks for: its ``Retry-After`` (delay-seconds or an HTTP date), else the reset of an
    exhausted daily budget (``X-RateLimit-Remaining: 0`` and ``X-RateLimit-Reset`` seconds), else None."""
    value = response.headers.get("retry-after")
    if value:
        value = value.strip()
        if value.isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            return max(0.0, (when - (now or _utcnow)()).total_seconds())
    remaining, reset = response.headers.get("x-ratelimit-remaining"), response.headers.get("x-ratelimit-reset")
    if remaining is not None and remaining.strip() in ("0", "0.0") and reset and reset.strip().isdigit():
        return float(reset)
    return None


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def api_message(response: httpx.Response) -> str:
    """The API's own words about a refused request: a JSON ``message`` or ``error`` (OpenAlex, Semantic Scholar),
    else the start of the body's text."""
    text = response.text.strip()
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past what a message is
        body = None
    if isinstance(body, dict):
        for key in ("message", "error", "detail"):
            if isinstance(body.get(key), str) and body[key].strip():
                text = body[key].strip()
                break
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."


def _json(response: httpx.Response) -> object:
    try:
        return json.loads(response.content)
    except ValueError as exc:
        raise Retry(f"the answer is not valid JSON ({exc})") from None
    except RecursionError:
        raise Retry("the answer is not valid JSON (nested too deeply)") from None


def _cause(exc: BaseException) -> str:
    """The innermost reason of an httpx error (``[Errno 111] Connection refused``), shortly."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


class Session:
    """Requests to one API at ``base_url`` (a mirror or a test server can stand in), with the ``Policy``'s retries.

    ``params`` are sent with every request (OpenAlex's ``api_key``, ``mailto``), ``headers`` too (Semantic
    Scholar's ``x-api-key``); ``interval`` is the least gap between requests unless the policy sets one.
    ``auth_hint`` is added to a 401 or 403's message (where a key comes from). ``notice`` is told, in one line,
    of each retry and what it waits for. Use it as a context manager (the connection is closed at the end).
    """

    def __init__(
        self,
        base_url: str,
        *,
        policy: Policy | None = None,
        interval: float = 0.0,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        auth_hint: str = "",
        notice: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise FetchError(
                f"--base-url {base_url!r} is not an http(s) URL: give one such as https://api.openalex.org"
            )
        self.base_url = base_url.rstrip("/")
        self.host = parts.netloc
        self.policy = policy or Policy()
        self.interval = self.policy.interval if self.policy.interval is not None else interval
        self.params = {k: v for k, v in (params or {}).items() if v}
        self.auth_hint = auth_hint
        self.notice = notice
        self.sleep = sleep
        self.stats = Stats()
        self._last = float("-inf")
        timeout = httpx.Timeout(self.policy.timeout, connect=max(10.0, self.policy.timeout / 10))
        home = httpx.URL(self.base_url)
        secrets = list(headers or {})

        def keep_secrets_home(request: httpx.Request) -> None:
            """A redirect to another origin does not carry the key headers (httpx drops only Authorization)."""
            if (request.url.scheme, request.url.host, request.url.port) != (home.scheme, home.host, home.port):
                for name in secrets:
                    request.headers.pop(name, None)

        self.client = httpx.Client(
            timeout=timeout,
            headers={"User-Agent": USER_AGENT, **(headers or {})},
            follow_redirects=True,  # OpenAlex redirects a merged work to the one it was merged into
            limits=httpx.Limits(max_connections=1),  # one connection at a time, as arXiv asks of everyone
            event_hooks={"request": [keep_secrets_home]},
        )

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def get_json(self, path: str, params: dict | None = None) -> object:
        """GET ``path`` and its JSON (an answer that is not JSON is tried again: a body cut off without a length)."""
        return self.request("GET", path, params=params, parse=_json)

    def post_json(self, path: str, params: dict | None = None, body: object = None, refused=None) -> object:
        """POST ``body`` as JSON to ``path`` and return the JSON answer (``refused``: as for ``request``)."""
        return self.request("POST", path, params=params, body=body, parse=_json, refused=refused)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict | None = None,
        body: object = None,
        parse: Callable[[httpx.Response], object] = _json,
        refused: Callable[[httpx.Response], object] | None = None,
    ) -> object:
        """``parse(response)`` of the first usable answer to ``method path``, tried as the policy says.

        ``refused`` may turn an answer the API refused (a 4xx other than 429) into a result instead of an error
        (a batch's "too large" answer that the caller splits); it returns None to leave it an error."""
        url = self.base_url + path
        query = {**self.params, **(params or {})}
        tries = self.policy.tries
        connect_failures = 0
        for attempt in range(1, tries + 1):
            self._throttle()
            self.stats.requests += 1
            wait: float | None = None
            connect_failed = False
            try:
                response = self.client.request(method, url, params=query, json=body)
            except httpx.ConnectTimeout:
                connect_failures, connect_failed = connect_failures + 1, True
                reason = "the connection timed out"
            except httpx.ConnectError as exc:
                connect_failures, connect_failed = connect_failures + 1, True
                reason = f"cannot connect: {_cause(exc)}"
            except httpx.TimeoutException:
                reason = f"no answer within {self.policy.timeout:g} s"
            except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                reason = f"the answer was cut off ({_cause(exc)})"
            except httpx.HTTPError as exc:  # an unsupported scheme, a malformed URL: trying again will not help
                raise FetchError(f"cannot request {url} ({_cause(exc)}): check --base-url") from None
            else:
                status = response.status_code
                if 200 <= status < 300:
                    try:
                        return parse(response)
                    except Retry as exc:
                        reason = str(exc)
                elif status in RETRY_STATUSES:
                    reason = f"{status} {response.reason_phrase}".strip()
                    if status in (429, 503):
                        wait = retry_after(response)
                        if wait is not None and wait > self.policy.max_wait:
                            raise FetchError(
                                f"{self.host} asks to wait {duration(wait)} before the next request ({reason}): "
                                "run the same command again then"
                            ) from None
                else:
                    if refused is not None:
                        result = refused(response)
                        if result is not None:
                            return result
                    raise FetchError(self._refusal(response)) from None
            given_up = attempt == tries or (connect_failures and connect_failures >= CONNECT_TRIES)
            if given_up:
                raise FetchError(self._gave_up(reason, attempt, connect_failed)) from None
            delay = wait if wait is not None else self._backoff(attempt)
            self.stats.retries += 1
            if self.notice is not None:
                self.notice(f"{self.host}: {reason}; trying again in {delay:.1f} s ({attempt + 1} of {tries})")
            self.stats.waited += delay
            self.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _throttle(self) -> None:
        gap = time.monotonic() - self._last
        if gap < self.interval:
            self.sleep(self.interval - gap)
        self._last = time.monotonic()

    def _backoff(self, attempt: int) -> float:
        step = min(self.policy.backoff_cap, self.policy.backoff * 2 ** (attempt - 1))
        return step * (0.5 + random.random() / 2)

    def _gave_up(self, reason: str, attempts: int, unreachable: bool) -> str:
        if unreachable:
            return (
                f"cannot reach {self.host} ({reason}; {attempts} tries): check the network connection, or the "
                "address given with --base-url"
            )
        if reason.startswith("429"):
            return (
                f"{self.host} still answers {reason} after {attempts} tries: run the same command again later (it "
                "continues), or with an API key, which raises the limit"
            )
        return f"{self.host} failed {attempts} times (last: {reason}): the service has trouble; try again later"

    def _refusal(self, response: httpx.Response) -> str:
        status = f"{response.status_code} {response.reason_phrase}".strip()
        message = api_message(response)
        text = f"{self.host} refused the request ({status}{': ' + message if message else ''})"
        if response.status_code in (401, 403) and self.auth_hint:
            return f"{text}: {self.auth_hint}"
        if response.status_code == 404:
            return f"{text}: check --base-url (it should name the API's root)"
        return f"{text}: check the options"
