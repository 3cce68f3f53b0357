"""The console's actions: each the library call the matching CLI command makes, each logged.

An action runs only when the console was started with ``--allow-actions``, after a person
confirmed it on a page carrying the console's CSRF token. Each one leaves a row in the run
log (kind ``console``, stage None) whose details name the action, its arguments, its result,
and who asked: the client's host and its user agent.

| action  | arguments                           | the library call (as the CLI)                    |
|---------|-------------------------------------|--------------------------------------------------|
| requeue | topic, ids                          | ``requeue_named`` (quarantine requeue)            |
| retry   | queue, ids (dead jobs)              | ``Queue.requeue``                                 |
| cancel  | queue, ids (pending/running jobs)   | ``Queue.cancel`` (queue cancel)                   |
| pause   | schedule                            | ``Scheduler.pause`` (schedule pause)              |
| resume  | schedule                            | ``Scheduler.resume`` (schedule resume)            |
| replay  | topic, consumer, from_id, to_id     | ``acks.replay_in_current_transaction`` (replay)   |
| seek    | group, topic, partition, offset     | ``ConsumerGroup.seek``                            |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..api.source import Source
from ..errors import ConsoleNotFoundError, ConsoleRequestError, MinikafkaError
from ..ledger.consuming import RunResult, new_run_id, write_run_in_current_transaction
from ..ledger.topics import acks
from ..util.clock import utc_now
from ..util.redact import redact_and_cut

ActionRefused = ConsoleRequestError  # an action's arguments are missing or malformed: nothing ran
ActionTargetMissing = ConsoleNotFoundError  # it names what the ledger does not hold (a group): nothing ran
INT64 = (-(2**63), 2**63 - 1)  # what SQLite's INTEGER holds: ids, offsets, partitions
ActionFailed = MinikafkaError  # the library call ran and did nothing (the run log says 'failed')


@dataclass(frozen=True)
class Action:
    name: str
    title: str
    fields: tuple[str, ...]
    run: Callable[[Source, object, dict], tuple[str, list[str]]]

    def describe(self, args: dict) -> str:
        shown = ", ".join(f"{k} {args[k]}" for k in self.fields if args.get(k) not in (None, "", []))
        return f"{self.title}: {shown}"


def _whole(text: str) -> int | None:
    """``text`` as an int SQLite can hold (64 bits), else None."""
    try:
        number = int(text) if len(text) <= 40 else None
    except (TypeError, ValueError):
        return None
    return number if number is not None and INT64[0] <= number <= INT64[1] else None


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 60 else f"{text[:40]!r}... ({len(text)} characters)"


def _ids(args: dict) -> list[int]:
    raw = args.get("ids") or []
    raw = [part for item in ([raw] if isinstance(raw, str) else raw) for part in str(item).replace(",", " ").split()]
    ids = [_whole(i) for i in raw]
    if None in ids:
        raise ActionRefused(f"ids are numbers (whole numbers up to {INT64[1]}), got {_shown(' '.join(raw))}")
    if not ids:
        raise ActionRefused("choose at least one id")
    return ids


def _int(args: dict, key: str, *, default: int | None = None) -> int:
    value = args.get(key)
    if value in (None, ""):
        if default is None:
            raise ActionRefused(f"{key} is required")
        return default
    number = _whole(str(value))
    if number is None:
        raise ActionRefused(f"{key} must be a whole number from {INT64[0]} to {INT64[1]}, got {_shown(str(value))}")
    return number


def _text(args: dict, key: str) -> str:
    value = (args.get(key) or "").strip()
    if not value:
        raise ActionRefused(f"{key} is required")
    return value


def _requeue(source: Source, defns, args: dict) -> tuple[str, list[str]]:
    from ..api.core.requeue import requeue_named

    topic, ids = _text(args, "topic"), _ids(args)
    declared = next((d.topics[topic] for d in defns if topic in d.topics), None)
    result = requeue_named(source, topic, ids, declared.model if declared is not None else None)
    text = (f"requeued {result.requeued} row(s) of {topic}: {result.appended} appended, {result.replayed} pending "
            f"again for their consumer, {result.duplicates} already in the topic")
    still = "; ".join(f"{qid}: {redact_and_cut(reason, 200)}" for qid, reason in result.failed)
    if result.failed and result.requeued == 0:  # as the CLI: a "success" that did nothing is an error
        raise ActionFailed(f"no row of {topic} could be requeued: all {len(result.failed)} still fail and stay in "
                           f"the quarantine (attempts counted): {still}")
    if result.failed:
        text += f"; still quarantined: {still}"
    return text, [topic]


def _queue(source: Source, args: dict):
    from ..api.modes.queues import open_queue

    return open_queue(source, _text(args, "queue"))


def _retry(source: Source, defns, args: dict) -> tuple[str, list[str]]:
    q, ids = _queue(source, args), _ids(args)
    n = q.requeue(ids)
    return f"{n} dead job(s) of {q.name} pending again with fresh attempts", [q.topic.name]


def _cancel(source: Source, defns, args: dict) -> tuple[str, list[str]]:
    q, ids = _queue(source, args), _ids(args)
    done = [j for j in ids if q.cancel(j)]
    rest = [j for j in ids if j not in done]
    text = f"cancelled job(s) {done} of {q.name}" if done else f"nothing cancelled in {q.name}"
    if rest:
        text += f"; not pending or running: {rest}"
    return text, [q.topic.name]


def _schedule(verb: str):
    def run(source: Source, defns, args: dict) -> tuple[str, list[str]]:
        name = _text(args, "schedule")
        getattr(source.scheduler(), verb)(name)
        return f"schedule {name}: {verb}d", []

    return run


def _replay(source: Source, defns, args: dict) -> tuple[str, list[str]]:
    topic, consumer = _text(args, "topic"), _text(args, "consumer")
    lo, hi = _int(args, "from_id", default=0), _int(args, "to_id", default=2**63 - 1)
    if lo > hi:
        raise ActionRefused("from_id is greater than to_id")
    source.layout(topic)
    with source.ledger.atomic() as conn:
        cid = acks.require_consumer(conn, topic, consumer)
        n = acks.replay_in_current_transaction(conn, topic, cid, lo, hi, utc_now())
    return f"{n} row(s) of {topic} pending again for consumer {consumer}", [topic]


def _seek(source: Source, defns, args: dict) -> tuple[str, list[str]]:
    group, topic = _text(args, "group"), _text(args, "topic")
    partition, offset = _int(args, "partition", default=0), _int(args, "offset")
    source.layout(topic)
    if acks.find_consumer(source.ledger.conn, topic, group) is None:  # a mistyped name would make a new group
        raise ActionTargetMissing(f"no consumer group {group!r} reads {topic!r}: seek moves a group that exists "
                                  "(the console creates none)")
    source.group(group).seek(topic, partition, offset)
    return f"group {group} on {topic} partition {partition} now at offset {offset}", [topic]


ACTIONS = {a.name: a for a in (
    Action("requeue", "Requeue quarantined rows", ("topic", "ids"), _requeue),
    Action("retry", "Retry dead jobs", ("queue", "ids"), _retry),
    Action("cancel", "Cancel jobs", ("queue", "ids"), _cancel),
    Action("pause", "Pause a schedule", ("schedule",), _schedule("pause")),
    Action("resume", "Resume a schedule", ("schedule",), _schedule("resume")),
    Action("replay", "Replay rows for a consumer", ("topic", "consumer", "from_id", "to_id"), _replay),
    Action("seek", "Move a consumer group", ("group", "topic", "partition", "offset"), _seek),
)}


def _clean(value):
    """An argument as the run log keeps it: long values cut (a refused 5,000-character name is not kept whole)."""
    if isinstance(value, list):
        return [_clean(v) for v in value[:50]]
    text = str(value)
    return text if len(text) <= 200 else f"{redact_and_cut(text, 100)} ({len(text)} characters)"  # masked, then cut


def perform(path: str, defns, name: str, args: dict, *, host: str, user_agent: str,
            busy_timeout: float = 30.0) -> RunResult:
    """Run action ``name`` on the ledger at ``path`` and record it in the run log.

    ``defns``: the console's pipeline files (a topic they declare is requeued with their model).
    ``busy_timeout``: seconds to wait for another writer.

    Returns:
        The run's result: status 'succeeded' with the action's summary in ``details['result']``,
        or 'failed' with the library's error.

    Raises:
        ConsoleRequestError, ConsoleNotFoundError: the arguments were refused (malformed, or naming
            what the ledger does not hold): nothing ran, and the run log holds a failed run saying why.
    """
    action = ACTIONS[name]
    clean = {k: _clean(args.get(k)) for k in action.fields if args.get(k) not in (None, "", [])}
    run = RunResult(new_run_id("console"), "console",
                    details={"action": name, "args": clean, "host": host, "user_agent": _clean(user_agent)})
    with Source(path, create=False, busy_timeout=busy_timeout) as source:
        try:
            text, topics = action.run(source, defns, args)
        except (ActionRefused, ActionTargetMissing) as exc:
            run.finish("failed", f"refused: {exc}")
            with source.ledger.atomic() as conn:
                write_run_in_current_transaction(conn, run)
            raise
        except MinikafkaError as exc:
            run.finish("failed", str(exc))
        else:
            run.inputs = topics
            run.details["result"] = text
            run.finish("succeeded")
        with source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, run)
    return run
