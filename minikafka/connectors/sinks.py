"""TopicSink: a streaming function's output written into a topic, exactly once.

Given as ``sink=`` to ``source.streaming(...)``, its rows are written in the same SQLite
transaction that commits the window (and acks its input rows). Outside a streaming
consumer, ``put(message)`` appends one message.
"""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentTypeError


class TopicSink:
    """Write outputs to ``topic`` (a Topic or Stream, or a topic name on the same ledger)."""

    def __init__(self, topic: Any):
        self.topic = topic

    def __repr__(self) -> str:
        return f"TopicSink({getattr(self.topic, 'name', self.topic)!r})"

    # marks the sink as transactional: streaming() writes it inside the window's commit
    write_in_current_transaction = True

    def put(self, message: Any) -> None:
        if isinstance(self.topic, str):
            raise ArgumentTypeError("TopicSink(name).put() needs a Topic object; streaming() resolves names itself")
        self.topic.append(message)


class HTTPSink:
    """POST each window's output to an endpoint as ``{"key": ..., "messages": [...]}``.

    Built on the HTTP delivery code of the consumer groups (``connectors/http.py``): one
    pooled httpx client, an ``Idempotency-Key`` header naming the window (consumer,
    topic, window id and row range), so a window sent again after a crash or a retry
    carries the same key and the receiver can drop it. Any 2xx is success; anything else
    (non-2xx, timeout, refused connection) is retried with exponential backoff and
    jitter, ``max_attempts`` times in all, then raises ``ConnectorError`` (the window
    fails and is offered again later: at-least-once). Header values (secrets) are never
    printed.

    Args:
        endpoint: an http(s) URL.
        headers: extra headers for every request.
        timeout: seconds for connecting, sending and reading the answer.
        max_attempts: tries per window before giving up on it for now.
        backoff_base, backoff_cap: the retry delays (seconds).
    """

    def __init__(self, endpoint: str, *, headers: dict[str, str] | None = None, timeout: float = 10.0,
                 max_attempts: int = 3, backoff_base: float = 0.5, backoff_cap: float = 30.0):
        from ..errors import ConnectorError
        from .http import Backoff, HttpPoster, redact_url

        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConnectorError(f"max_attempts must be a positive integer, got {max_attempts!r}")
        try:
            self._poster = HttpPoster(endpoint, headers=headers, timeout=timeout)
        except ValueError as exc:
            raise ConnectorError(str(exc)) from exc
        self.endpoint = redact_url(endpoint)
        self.max_attempts = max_attempts
        self.backoff = Backoff(backoff_base, backoff_cap)

    def __repr__(self) -> str:
        return f"HTTPSink({self.endpoint!r})"

    def put_many(self, messages: list[Any], key: str | None = None) -> None:
        """POST the messages of one window; returns once the endpoint answered 2xx.

        Raises:
            ConnectorError: no 2xx after ``max_attempts`` tries (names the endpoint and the last answer).
        """
        import time

        from ..errors import ConnectorError

        if not messages:
            return
        body = {"key": key, "messages": messages}
        outcome = None
        for attempt in range(1, self.max_attempts + 1):
            outcome = self._poster.post_json(body, idempotency_key=key)
            if outcome.ok:
                return
            if attempt < self.max_attempts:
                time.sleep(self.backoff.delay(attempt))
        raise ConnectorError(f"{self.endpoint} did not accept {key or 'the messages'} after "
                             f"{self.max_attempts} attempt(s): {outcome.describe()}")

    def put(self, message: Any) -> None:
        """POST one message (no idempotency key: use it inside ``streaming()`` for one)."""
        self.put_many([message])

    def close(self) -> None:
        self._poster.close()
