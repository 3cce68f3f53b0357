"""The web console: a Starlette app over one ledger, pages rendered on the server.

- Each request opens the ledger read-only, reads what its page shows in one short read
  transaction (``reads``), closes it, and only then renders: no transaction outlives a
  request, none is open while a response streams.
- Pages work without JavaScript. A small script (``static/live.js``) listens to
  ``/events`` (server-sent events) and reloads the page's live parts when the ledger
  commits; the app has ONE watcher on the file (the ledger's ``Watcher``), and every event
  stream awaits it: no polling loop per client.
- Actions (``actions``) exist only with ``allow_actions``: a GET shows a confirmation page
  holding the console's CSRF token, the POST must carry it (else 403). Without
  ``allow_actions`` every POST is refused (403) and no page offers one.
- ``/metrics``: the ledger's figures in Prometheus' text format (``observe``), not a page; it is
  guarded like every route (Prometheus sends the auth token as a bearer token).
- ``auth_token``: every request must carry it (``Authorization: Bearer``, the cookie the
  console sets, or once ``?token=``, which sets the cookie and redirects without it).
- Every value a template prints goes through ``util.redact.redact_secrets`` (the
  environment's ``finalize``): a URL password, a token or a header value never reaches a page.
  A text shown shortened is masked first and cut after (the ``cut`` and ``cell`` filters,
  ``util.redact.redact_and_cut``); failing values of a column named like a secret are ``***``
  (the ``samples`` filter).
- A missing ledger (404), a damaged one (409), a busy one (503, after at most ``READ_BUSY_S``
  seconds), an unknown topic, run or row or a name no topic can have (404), a bad filter or a
  number past 64 bits (400): a page that says so, never a traceback, never a 500.
- Every page is built (ledger read, masking, rendering) in a daemon thread of its own
  (``off_loop``): a slow page never stalls the event loop or another page, and SIGTERM stops
  the server without waiting for it.
- A "go back" link (``back=``) is kept only when it is a path of this console (no open redirect).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
import re
import secrets
import sqlite3
import threading
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

from ..api.source import Source
from ..errors import (
    ConsoleNotFoundError,
    ConsoleRequestError,
    InvalidNameError,
    InvalidSettingError,
    LedgerError,
    LedgerNotFoundError,
    MinikafkaError,
    TopicNotFoundError,
)
from ..quality.report import shown_observed, shown_sample
from ..util.optional import require
from ..util.redact import is_secret_name, redact_and_cut, redact_secrets
from . import actions, dag, reads

log = logging.getLogger("minikafka.console")

HERE = Path(__file__).parent
AUTH_COOKIE = "minikafka_console"
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]
KEEPALIVE_S = 15.0
READ_BUSY_S = 3.0  # a page waits at most this long for a ledger another process holds, then says it is busy
ACTION_BUSY_S = 5.0  # an action waits at most this long for the write lock
PAGE_THREADS = 16  # pages built at once (each in its own daemon thread); more wait their turn
INT64 = (-(2**63), 2**63 - 1)  # SQLite's INTEGER: a row id, an offset, a quarantine id
NAV = [("/", "Overview"), ("/runs", "Runs"), ("/topics", "Topics"), ("/quarantine", "Quarantine"),
       ("/queues", "Queues"), ("/schedules", "Schedules"), ("/groups", "Groups")]


@dataclass
class Console:
    """What every request of one console shares: the ledger's path, the pipeline files shown,
    whether actions are allowed, the CSRF and auth tokens, and the one watcher."""

    path: str
    pipelines: tuple = ()
    allow_actions: bool = False
    auth_token: str | None = None
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    watcher: object = None
    page_slots: object = None  # an asyncio.Semaphore of PAGE_THREADS, made on the server's loop

    def own_secrets(self) -> list[str]:
        """The console's own tokens: masked wherever a page or a log line might quote them."""
        return [t for t in (self.auth_token, self.csrf_token) if t]


def _templates(console: Console):
    jinja2 = require("jinja2", "ui")
    from markupsafe import Markup

    def finalize(value):
        if isinstance(value, Markup) or not isinstance(value, str):
            return "" if value is None else value
        return redact_secrets(value, console.own_secrets())

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True,
                             finalize=finalize, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(nav=NAV, allow_actions=console.allow_actions, ledger_path=console.path)
    env.filters["qs"] = lambda d: urlencode({k: v for k, v in d.items() if v not in (None, "")}, doseq=True)
    # JSON as plain text (jinja's tojson makes markup, which the redaction above would pass by)
    env.filters["json"] = lambda v, indent=None: json.dumps(v, indent=indent, ensure_ascii=False, default=str)
    # every cut of a text masks it first (a secret the cut went through would show its head)
    env.filters["cell"] = lambda value: redact_and_cut(value, CELL_CHARS, console.own_secrets())
    env.filters["cut"] = lambda value, limit: redact_and_cut(value, limit, console.own_secrets())
    env.filters["samples"] = lambda result, n=5: ", ".join(str(v) for v in shown_sample(result)[:n])
    env.filters["observed"] = lambda result: "" if (v := shown_observed(result)) is None else v
    env.tests["secret_name"] = is_secret_name
    return env


def create_app(path: str | Path, *, pipelines=(), allow_actions: bool = False, auth_token: str | None = None,
               allowed_hosts: list[str] | None = None):
    """The console's ASGI app over the ledger at ``path``.

    Args:
        pipelines: loaded ``PipelineDefinition``s on this ledger (their DAGs are drawn, their models
            requeue rows); none: the overview draws the stages the run log knows.
        allow_actions: offer and accept actions (requeue, retry, cancel, pause, resume, replay, seek).
        auth_token: when set, required on every request.
        allowed_hosts: the Host header values served (default: loopback names only, against DNS rebinding).

    Raises:
        InvalidSettingError: ``auth_token`` is empty (it would guard nothing).
        MissingDependencyError: the ``ui`` extra (starlette, jinja2) is not installed.
    """
    if auth_token is not None and not auth_token.strip():
        raise InvalidSettingError("the console's auth token is empty: give a token, or none at all")
    require("starlette", "ui")
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    console = Console(str(path), tuple(pipelines), allow_actions, auth_token)
    env = _templates(console)
    pages = Pages(console, env)

    @asynccontextmanager
    async def lifespan(app):
        yield
        if console.watcher is not None:
            console.watcher.close()

    built = functools.partial(off_loop, console)
    routes = [
        Route("/", built(pages.overview)), Route("/runs", built(pages.runs)), Route("/runs/{run_id}", built(pages.run)),
        Route("/runs/{run_id}/report", built(pages.report)), Route("/topics", built(pages.topics)),
        Route("/topics/{name}", built(pages.topic)), Route("/quarantine", built(pages.quarantine)),
        Route("/quarantine/{qid:int}", built(pages.quarantined)), Route("/queues", built(pages.queues)),
        Route("/schedules", built(pages.schedules)), Route("/groups", built(pages.groups)),
        Route("/events", pages.events), Route("/metrics", built(pages.metrics)),
        Route("/actions/{name}", built(pages.confirm), methods=["GET"]),
        Route("/actions/{name}", pages.act, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or LOOPBACK_HOSTS),
                  Middleware(Guard, console=console)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={404: pages.not_found, 405: pages.not_allowed, 500: pages.server_error})
    app.state.console = console
    return app


def off_loop(console: Console, endpoint):
    """``endpoint`` (a sync page: ledger read, masking, rendering) as an async endpoint that builds
    the page in a daemon thread of its own, at most ``PAGE_THREADS`` at once.

    The event loop only awaits: another page, a static file or an event stream is served while one
    page is slow. A page abandoned on shutdown (SIGTERM) is left to its daemon thread, which dies
    with the process: the server never waits for it (Starlette's own thread pool would).
    """

    @functools.wraps(endpoint)
    async def page(request):
        if console.page_slots is None:
            console.page_slots = asyncio.Semaphore(PAGE_THREADS)
        async with console.page_slots:
            loop = asyncio.get_running_loop()
            done = loop.create_future()

            def settle(result, exc):
                if not done.done():
                    done.set_exception(exc) if exc is not None else done.set_result(result)

            def work():
                try:
                    result, exc = endpoint(request), None
                except BaseException as error:  # handed to the loop, which raises it in the request's task
                    result, exc = None, error
                try:
                    loop.call_soon_threadsafe(settle, result, exc)
                except RuntimeError:  # the loop closed meanwhile (the server stopped): nobody waits
                    pass

            threading.Thread(target=work, name=f"console page {request.url.path[:60]}", daemon=True).start()
            return await done

    return page


def same_secret(given: str | None, expected: str) -> bool:
    """``given`` is ``expected``, compared in constant time; any text (non-ASCII too) is just no match."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


_CONTROL = re.compile(r"[\x00-\x20\x7f\\]")


def local_path(back: str | None) -> str:
    """``back`` when it is a path of this console (``/topics/x?after=5``), else ``/``: never another
    site (``//evil.example``, ``/\\evil.example``, ``https://...``), never a control character."""
    if not back or not back.startswith("/") or back.startswith("//") or _CONTROL.search(back):
        return "/"
    parts = urlsplit(back)
    if parts.scheme or parts.netloc:
        return "/"
    first = parts.path.split("/")[1]
    return back if f"/{first}" in {p for p, _ in NAV} | {"/actions"} else "/"


class Guard:
    """Auth token (when set), refusing POSTs without --allow-actions, and headers every page carries."""

    def __init__(self, app, console: Console):
        self.app, self.console = app, console

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse, RedirectResponse

        request = Request(scope)
        token = self.console.auth_token
        if token:
            given = request.query_params.get("token")
            if same_secret(given, token):
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                path = request.url.path
                path = "/" if path.startswith(("//", "/\\")) or _CONTROL.search(path) else path  # not another site
                url = path + (f"?{urlencode(rest)}" if rest else "")
                response = RedirectResponse(url, status_code=303)
                response.set_cookie(AUTH_COOKIE, token, httponly=True, samesite="strict")
                return await response(scope, receive, send)
            header = request.headers.get("authorization", "")
            offered = request.cookies.get(AUTH_COOKIE) or (header[7:] if header.startswith("Bearer ") else "")
            if not same_secret(offered, token):
                return await PlainTextResponse("401: this console needs its token (--auth-token)",
                                               status_code=401)(scope, receive, send)
        if request.method == "POST" and not self.console.allow_actions:
            return await PlainTextResponse("403: this console is read-only (start it with --allow-actions)",
                                           status_code=403)(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer"),
                            (b"x-content-type-options", b"nosniff"),
                            (b"content-security-policy",
                             b"default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
                             b"frame-ancestors 'none'; form-action 'self'")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class Pages:
    """The endpoints: each reads through ``reads`` (or acts through ``actions``) and renders a template."""

    def __init__(self, console: Console, env):
        self.console, self.env = console, env

    # -- rendering and errors ---------------------------------------------------------------
    def render(self, request, template: str, status: int = 200, **context):
        from starlette.responses import HTMLResponse

        page = self.env.get_template(template).render(request=request, path=request.url.path,
                                                       csrf_token=_markup(self.console.csrf_token), **context)
        return HTMLResponse(page, status_code=status)

    def problem(self, request, status: int, title: str, message: str):
        return self.render(request, "problem.html", status=status, title=title, message=message)

    async def not_found(self, request, exc):
        return self.problem(request, 404, "Not found", f"no page at {request.url.path}")

    async def not_allowed(self, request, exc):
        return self.problem(request, 405, "Method not allowed", f"{request.method} is not served here")

    async def server_error(self, request, exc):
        log.error("console page %s failed: %s", request.url.path, redact_secrets(str(exc), self.console.own_secrets()))
        return self.problem(request, 500, "Something went wrong", "the page could not be built; the console's log "
                            "says why")

    def busy(self, request):
        return self.problem(request, 503, "The ledger is busy", f"{self.console.path}: another process holds the "
                            f"ledger (a long write, or a connection in exclusive locking mode); waited "
                            f"{READ_BUSY_S:g} s. Try again in a moment.")

    def _open(self) -> Source:
        return Source(self.console.path, read_only=True, busy_timeout=READ_BUSY_S)

    def page(self, request, template: str, read, **extra):
        """Open the ledger, read, close, render; each failure a page saying what is wrong (sync endpoints
        run in Starlette's thread pool)."""
        try:
            with self._open() as source:
                data = read(source)
        except LedgerNotFoundError as exc:
            return self.problem(request, 404, "No ledger", str(exc))
        except (ConsoleNotFoundError, TopicNotFoundError, InvalidNameError) as exc:
            return self.problem(request, 404, "Not found", str(exc).strip("'\""))
        except ConsoleRequestError as exc:
            return self.problem(request, 400, "Bad request", str(exc))
        except (LedgerError, sqlite3.DatabaseError) as exc:
            if is_busy(exc):
                return self.busy(request)
            return self.problem(request, 409, "The ledger cannot be read",
                                f"{self.console.path}: {exc} (a damaged file, or not a minikafka ledger)")
        return self.render(request, template, **data, **extra)

    def metrics(self, request):
        """Prometheus' text exposition of the ledger (``observe``), behind the same guard as every page:
        with an auth token, Prometheus sends it as a bearer token (``authorization:`` in the scrape config)."""
        from starlette.responses import PlainTextResponse

        from ..observe.prometheus import CONTENT_TYPE
        from ..observe.scrape import PipelineScope, exposition

        scopes = [PipelineScope(d.name, tuple(s.name for s in d.stages), d.health.backups) for d in self.console.pipelines]
        try:
            text = exposition(self.console.path, scopes)
        except LedgerNotFoundError as exc:
            return PlainTextResponse(f"404: {exc}\n", status_code=404)
        except (LedgerError, sqlite3.DatabaseError) as exc:
            if is_busy(exc):
                return PlainTextResponse("503: the ledger is busy; try again in a moment\n", status_code=503)
            return PlainTextResponse(f"409: {self.console.path}: the ledger cannot be read (a damaged file, or not a "
                                     "minikafka ledger)\n", status_code=409)
        return PlainTextResponse(text, media_type=CONTENT_TYPE)

    # -- pages ---------------------------------------------------------------------------------
    def overview(self, request):
        def read(source):
            data = reads.overview(source, self.console.pipelines)
            data["svgs"] = [(g["name"], _markup(dag.draw(g["stages"], data["last"], data["lag"])))
                            for g in data["graphs"]]
            return data

        return self.page(request, "overview.html", read, live=True)

    def runs(self, request):
        q = request.query_params

        def read(source):
            data = reads.runs(source, stage=q.get("stage"), status=q.get("status"), since=q.get("since"),
                              until=q.get("until"), show_all=bool(q.get("all")))
            data["charts"] = {name: (_markup(dag.bars(rs, "rows_out")), _markup(dag.bars(rs, "duration_s")))
                              for name, rs in data["timeline"].items() if rs}
            return data

        return self.page(request, "runs.html", read, live=True)

    def run(self, request):
        return self.page(request, "run.html", lambda s: reads.run(s, request.path_params["run_id"]), live=True)

    def report(self, request):
        """The run's HTML quality report, when it lies in ``quality-reports/`` beside the ledger."""
        from starlette.responses import HTMLResponse

        run_id = request.path_params["run_id"]
        found = {}

        def read(source):
            found.update(reads.run(source, run_id))
            return {}

        refused = self.page(request, "problem.html", read)
        if not found:
            return refused
        base = (Path(self.console.path).resolve().parent / "quality-reports").resolve()
        file = Path(found["report"]).resolve() if found.get("report") else None
        if file is None or base not in file.parents or not file.is_file():
            return self.problem(request, 404, "No report", f"run {run_id} has no quality report on this machine")
        return HTMLResponse(redact_secrets(file.read_text(errors="replace"), self.console.own_secrets()))

    def topics(self, request):
        return self.page(request, "topics.html", lambda s: {"topics": reads.topic_list(s)}, live=True)

    def topic(self, request):
        q = request.query_params

        def read(source):
            after, before = _int_param(q, "after", "a row id"), _int_param(q, "before", "a row id")
            return reads.topic(source, request.path_params["name"], after=after, before=before,
                               where=q.getlist("where"), consumer=q.get("consumer"), status=q.get("status"))

        return self.page(request, "topic.html", read, live=True)

    def quarantine(self, request):
        q = request.query_params

        def read(source):
            return reads.quarantine(source, topic=q.get("topic"), origin=q.get("origin"), reason=q.get("reason"),
                                    below=_int_param(q, "below", "a quarantine id"))

        return self.page(request, "quarantine.html", read, live=True)

    def quarantined(self, request):
        qid = request.path_params["qid"]

        def read(source):
            if not INT64[0] <= qid <= INT64[1]:
                raise ConsoleRequestError(f"the quarantine id must be a whole number up to {INT64[1]}, got one of "
                                          f"{len(str(qid))} digits")
            return reads.quarantined_row(source, qid)

        return self.page(request, "quarantined.html", read)

    def queues(self, request):
        return self.page(request, "queues.html", lambda s: reads.queue_list(s, request.query_params.get("state")),
                         live=True)

    def schedules(self, request):
        return self.page(request, "schedules.html", lambda s: {"schedules": reads.schedule_list(s)}, live=True)

    def groups(self, request):
        return self.page(request, "groups.html", reads.group_list, live=True)

    # -- live updates --------------------------------------------------------------------------
    async def events(self, request):
        """Server-sent events: ``change`` after each commit to the ledger (from any process)."""
        from starlette.responses import StreamingResponse

        from ..ledger.transactions import Watcher

        if self.console.watcher is None:
            self.console.watcher = Watcher(self.console.path)
        watcher = self.console.watcher

        async def stream():
            try:
                mark = watcher.mark()
            except MinikafkaError as exc:
                yield f"event: gone\ndata: {exc}\n\n"
                return
            yield "retry: 2000\n\n"
            while not await request.is_disconnected():
                try:
                    now = await watcher.wait_async(mark, KEEPALIVE_S)
                except MinikafkaError as exc:
                    yield f"event: gone\ndata: {exc}\n\n"
                    return
                if now == mark:
                    yield ": keep-alive\n\n"
                    continue
                mark = now
                yield f"event: change\ndata: {now}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    # -- actions ------------------------------------------------------------------------------
    def _action(self, request):
        name = request.path_params["name"]
        if not self.console.allow_actions:
            return None, self.problem(request, 403, "Read-only", "this console is read-only: start it with "
                                      "--allow-actions to act on the ledger")
        action = actions.ACTIONS.get(name)
        if action is None:
            return None, self.problem(request, 404, "Not found", f"no action {name!r}")
        return action, None

    def confirm(self, request):
        """The confirmation page of an action: what it will do, and a form carrying the CSRF token."""
        action, refused = self._action(request)
        if refused is not None:
            return refused
        args = {k: (request.query_params.getlist(k) if k == "ids" else request.query_params.get(k))
                for k in action.fields}
        return self.render(request, "confirm.html", action=action, args=args, text=action.describe(args),
                           back=local_path(request.query_params.get("back")))

    async def act(self, request):
        action, refused = self._action(request)
        if refused is not None:
            return refused
        form = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
        token = (form.get("csrf") or [""])[0]
        if not same_secret(token, self.console.csrf_token):
            return self.problem(request, 403, "Refused", "the form did not carry this console's token (CSRF): "
                                "open the action from the console's own page")
        args = {k: (form.get(k, []) if k == "ids" else (form.get(k) or [""])[0]) for k in action.fields}
        host = request.client.host if request.client else "unknown"
        agent = request.headers.get("user-agent", "")
        try:
            run = await off_loop(self.console, lambda _: actions.perform(
                self.console.path, self.console.pipelines, action.name, args, host=host, user_agent=agent,
                busy_timeout=ACTION_BUSY_S))(request)
        except ConsoleRequestError as exc:
            return self.problem(request, 400, "Bad request", str(exc))
        except (LedgerNotFoundError, ConsoleNotFoundError) as exc:
            return self.problem(request, 404, "Not found", str(exc))
        except (LedgerError, sqlite3.Error) as exc:  # busy past the timeout, read-only file, damaged
            if is_busy(exc):
                return self.problem(request, 503, "The ledger is busy", f"{self.console.path}: another process "
                                    f"holds the ledger; waited {ACTION_BUSY_S:g} s and changed nothing. Try again.")
            return self.problem(request, 409, "The ledger refused the action", f"{self.console.path}: {exc}; "
                                "nothing was changed")
        status = 200 if run.status == "succeeded" else 409
        return self.render(request, "done.html", status=status, action=action, run=run,
                           back=local_path((form.get("back") or ["/"])[0]))


CELL_CHARS = 120  # a table cell's text (masked, then cut: util.redact.redact_and_cut); the row's page shows it whole


def _int_param(query, name: str, what: str) -> int | None:
    """Query parameter ``name`` as an int (None when absent or empty).

    Raises:
        ConsoleRequestError: not a whole number SQLite can hold (64 bits), naming the parameter.
    """
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        number = int(value) if len(value) <= 40 else None
    except ValueError:
        number = None
    if number is None or not INT64[0] <= number <= INT64[1]:
        shown = repr(value) if len(value) <= 40 else f"a value of {len(value)} characters"
        raise ConsoleRequestError(f"{name} is {what}: whole numbers from {INT64[0]} to {INT64[1]}, got {shown}")
    return number


def is_busy(exc: BaseException) -> bool:
    """SQLite gave up waiting for a lock another connection holds (not a damaged file)."""
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text or "database table is locked" in text


def _markup(text: str):
    from markupsafe import Markup

    return Markup(text)
