"""A fork server: one pre-imported Python process that starts scripts as forked children.

Importing a heavy library stack (a Spark Connect client, pandas, pyarrow,
great-expectations) costs seconds in every fresh interpreter. ``ForkServer`` starts one
host process that imports the modules it is told to, once; each ``popen(cmd)`` then asks
it to fork a child that runs the script of ``cmd`` (``[python, script.py, args...]``) as
``__main__``, exactly as a fresh ``python script.py args...`` would: its own pid and
process group, its own argv, working directory and environment, its standard output and
error on the caller's pipes (passed over a Unix socket, SCM_RIGHTS), its own exit status.
Only library modules are imported in the host; the script and whatever it imports (a user's
job, its models) are imported in the child, so a file edited since the host started runs
as edited.

Crash contract: the host is started tied to the caller (``popen_tied``: it is SIGKILLed
when the caller dies) and each child is tied to the host the same way, so a killed caller
leaves neither. ``close()`` stops the host. A host that failed to start or has died is
never fatal: ``popen`` then starts a fresh process (``popen_tied``), and a child lost with
its host is started again fresh when the caller's ``retry`` says so.
The host forks from its single thread and holds no network connection, so forking is safe.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

from .procs import die_with_parent, popen_tied

READY_TIMEOUT_S = 120.0  # the host's imports; a child waits at most this long for its pid, then starts fresh
MESSAGE_BYTES = 1 << 20


class ForkServer:
    """A host process that imported ``preload`` and forks children for ``popen``.

    The host starts at once (in the background); a ``popen`` request is sent at once and
    answered once the host has imported what it needs.
    ``later``: modules it imports once ready and idle (a child that ``needs`` them waits
    for them; one that does not is forked meanwhile).
    """

    def __init__(self, preload: list[str], *, later: list[str] = (), env: dict[str, str] | None = None):
        self._lock = threading.Lock()
        self._ready: bool | None = None  # None: not known yet
        self._serving = False  # it said ready (then it exits by itself once the control socket closes)
        self.reason = ""  # why the host is not used (start failure, death)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control = ours
        code = ("import sys; del sys.path[0]; from minikafka.util.forkserver import serve; "
                f"serve({theirs.fileno()}, {os.getpid()}, {list(preload)!r}, {list(later)!r})")
        try:
            self.proc: subprocess.Popen | None = popen_tied(
                [sys.executable, "-c", code], env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError as exc:
            self.proc, self._ready, self.reason = None, False, f"the stage host did not start: {exc}"
        finally:
            theirs.close()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def ready(self, timeout: float = READY_TIMEOUT_S) -> bool:
        """Wait until the host has imported its modules; False when it failed or died."""
        with self._lock:
            if self._ready is None:
                self._control.settimeout(timeout)
                try:
                    answer = self._control.recv(MESSAGE_BYTES)
                except OSError as exc:
                    answer = f"no answer: {exc}".encode()
                self._ready = self._serving = answer == b"ready"
                if not self._ready:
                    self.reason = "the stage host did not start: " + (answer.decode(errors="replace") or
                                                                     self._exit_note())
                    self._stop()
            return self._ready

    def preload(self, modules: list[str]) -> None:
        """Have the host import ``modules`` too, once idle, as the ``later`` ones (a host started
        before its caller knew what its children would need)."""
        if not modules or self._ready is False:
            return
        try:
            with self._lock:
                self._control.send(json.dumps({"later": list(modules)}).encode())
        except OSError:  # a host that is gone: popen starts fresh processes
            pass

    def popen(self, cmd: list[str], *, env: dict[str, str] | None = None, stdout=None, stderr=None,
              text: bool = False, retry=None, needs: list[str] = ()):
        """A child running ``cmd`` (``[python, script, args...]``) forked from the host; a
        ``HostedProcess``, or a fresh ``popen_tied`` process when the host is not usable.

        ``needs``: modules of the host's ``later`` that must be imported before the child
        is forked. ``stdout``/``stderr``: ``subprocess.PIPE`` or None (inherit). ``retry()``: asked
        when the host dies while the child runs (the child dies with it); True starts the
        command again as a fresh process.
        """
        def fresh():
            return popen_tied(cmd, env=env, stdout=stdout, stderr=stderr, text=text)

        if self._ready is False:
            return fresh()
        pipes = [os.pipe() if want == subprocess.PIPE else None for want in (stdout, stderr)]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        request = json.dumps({"argv": cmd, "cwd": os.getcwd(), "env": dict(os.environ if env is None else env),
                              "needs": list(needs)})
        fds = [theirs.fileno()] + [p[1] if p else fd for p, fd in zip(pipes, (1, 2))]
        try:
            with self._lock:
                socket.send_fds(self._control, [request.encode()], fds)
            answer = self._answer(ours)
            pid = json.loads(answer)["pid"] if answer else None
        except (OSError, ValueError, KeyError):
            pid = None
        finally:
            theirs.close()
            for p in pipes:
                if p:
                    os.close(p[1])
        if pid is None:  # the host died (or never answered): this and every later child start fresh
            ours.close()
            for p in pipes:
                if p:
                    os.close(p[0])
            self._lost(self._why_not())
            return fresh()
        return HostedProcess(pid, ours, [p[0] if p else None for p in pipes], text, fresh if retry else None,
                             retry, self)

    def _answer(self, reply: socket.socket, poll: float = 0.1) -> bytes:
        """The host's answer to a request (sent at once: it comes once the host has imported
        what the child needs); b"" when the host exits first or stays silent too long."""
        reply.settimeout(poll)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                return reply.recv(MESSAGE_BYTES)
            except TimeoutError:
                if self.proc is None or self.proc.poll() is not None:  # a request queued in a dead host
                    return b""                                        # may not come back as an EOF at once
        return b""

    def _why_not(self) -> str:
        """What the host said before it went (an import that failed), else that it stopped."""
        for _ in range(3):  # a host that exited with our request unread first reports ECONNRESET
            try:
                answer = self._control.recv(MESSAGE_BYTES, socket.MSG_DONTWAIT)
            except ConnectionResetError:
                continue
            except OSError:
                break
            if answer and answer != b"ready":
                return "the stage host did not start: " + answer.decode(errors="replace")
            if not answer:
                break
        return "the stage host stopped answering"

    def _lost(self, reason: str) -> None:
        if self._ready is not False:
            self._ready, self.reason = False, reason
        self._stop()

    def _exit_note(self) -> str:
        if self.proc is None or self.proc.poll() is None:
            return "no answer"
        return f"it exited with code {self.proc.returncode}"

    def _stop(self) -> None:
        """Close the control socket (a ready host exits when it closes); kill a host that is
        still importing or does not exit within a second."""
        from .procs import kill_group

        try:
            self._control.shutdown(socket.SHUT_RDWR)  # also wakes a thread waiting in ready()
        except OSError:
            pass
        self._control.close()
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=1.0 if self._serving else 0)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)

    def close(self) -> None:
        """Stop the host (its children, if any still run, die with it)."""
        self._ready, self.reason = False, self.reason or "closed"
        self._stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class HostedProcess:
    """A child of the host, seen as a ``subprocess.Popen``: ``pid``, ``communicate()``,
    ``wait()``, ``poll()``, ``returncode`` (negative: killed by that signal); its process
    group is its own (``procs.kill_group`` works)."""

    def __init__(self, pid: int, reply: socket.socket, pipes: list[int | None], text: bool, fresh, retry,
                 server: ForkServer):
        self.pid = pid
        self.returncode: int | None = None
        self.host_lost = False  # the host died before it told how the child ended
        self._reply, self._pipes, self._text = reply, pipes, text  # the host's answer, our ends of the pipes
        self._fresh, self._retry, self._server = fresh, retry, server  # the fallback when the host is lost
        self._lock = threading.Lock()
        self._replaced: subprocess.Popen | None = None

    def poll(self) -> int | None:
        if self._replaced is not None:
            self.returncode = self._replaced.poll()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self._replaced is not None:
            self.returncode = self._replaced.wait(timeout)
            return self.returncode
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            raise subprocess.TimeoutExpired(str(self.pid), timeout)
        try:
            if self.returncode is None:
                self._reply.settimeout(timeout)
                try:
                    answer = self._reply.recv(MESSAGE_BYTES)
                except TimeoutError:
                    raise subprocess.TimeoutExpired(str(self.pid), timeout) from None
                except OSError:
                    answer = b""
                if answer:
                    self.returncode = int(json.loads(answer)["returncode"])
                else:  # the host died, and the child with it (parent-death signal)
                    self.host_lost = True
                    self.returncode = -signal.SIGKILL
                    self._server._lost("the stage host died")
                self._reply.close()
        finally:
            self._lock.release()
        return self.returncode

    def communicate(self):
        """Read the child's output until it ends; (stdout, stderr) (None for a stream not piped)."""
        out = _read_all(self._pipes)
        self.wait()
        if self.host_lost and self._fresh is not None and self._retry():
            self._replaced = self._fresh()
            self.pid = self._replaced.pid
            stdout, stderr = self._replaced.communicate()
            self.returncode = self._replaced.returncode
            return stdout, stderr
        if self._text:
            out = [o.decode(errors="replace") if o is not None else None for o in out]
        return out[0], out[1]


def _read_all(fds: list[int | None]) -> list[bytes | None]:
    chunks: dict[int, list[bytes]] = {fd: [] for fd in fds if fd is not None}
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            for key, _ in sel.select():
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
    return [b"".join(chunks[fd]) if fd is not None else None for fd in fds]


# --- the host ----------------------------------------------------------------------------


def serve(control_fd: int, parent: int, preload: list[str], later: list[str] = ()) -> None:
    """The host's main loop (run by ``python -c`` from ``ForkServer``): import ``preload``,
    say ready, then fork a child per request until the control socket closes. ``later``:
    modules imported once no request waits for the host; a request that names some of them
    in its ``needs`` is forked after they are imported, the others at once."""
    import importlib

    die_with_parent(parent)
    control = socket.socket(fileno=control_fd)
    try:
        for name in preload:
            importlib.import_module(name)
    except BaseException as exc:  # noqa: BLE001 - the caller falls back to fresh processes
        control.send(f"cannot import {name}: {type(exc).__name__}: {exc}".encode()[:4000])
        os._exit(1)
    if threading.active_count() != 1:  # forking with threads could copy a held lock
        control.send(f"a preloaded module started {threading.active_count() - 1} thread(s)".encode())
        os._exit(1)
    base_path = list(sys.path)
    host_entries = _pythonpath(os.environ)
    control.send(b"ready")
    later = list(later)
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, reply socket)
    waiting: list[tuple[dict, list[int]]] = []  # requests whose needs are not imported yet
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ)
    while True:
        events = sel.select(timeout=0 if later else None)
        for key, _ in events:
            if key.fileobj is control:
                while True:  # every request queued now: those that need nothing later go first
                    try:
                        message, fds = _recv_request(control)
                    except BlockingIOError:
                        break
                    except OSError:
                        message, fds = b"", []
                    if not message:  # the caller closed it (or died): stop; children die with the host
                        os._exit(0)
                    request = json.loads(message)
                    if "argv" not in request:  # preload(): more modules to import once idle
                        later += [m for m in request.get("later", ()) if m not in later and m not in sys.modules]
                        continue
                    waiting.append((request, fds))
            else:
                pidfd = key.fd
                pid, reply = children.pop(pidfd)
                sel.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                try:
                    reply.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
                except OSError:
                    pass
                reply.close()
        if later and not events:  # nothing to answer now: import the next module (then fork
            # what waited for it at once: no event may come to wake this loop again)
            try:
                importlib.import_module(later.pop(0))
            except Exception:  # noqa: BLE001 - a child that needs it fails on its own import, as a fresh one would
                pass
            if threading.active_count() != 1:  # no more forks: the caller falls back to fresh processes
                os._exit(1)
        for request, fds in list(waiting):
            if set(request.get("needs", ())) & set(later):
                continue
            waiting.remove((request, fds))
            started_r, started_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(started_r)
                sel.close()
                for _pid, reply in children.values():
                    reply.close()
                for pidfd in children:
                    os.close(pidfd)
                for _request, other in waiting:
                    for fd in other:
                        os.close(fd)
                control.close()
                _child(request, fds, os.getppid(), base_path, host_entries, started_w)
            os.close(started_w)
            os.read(started_r, 1)  # its process group exists (the caller may kill it as soon as it has the pid)
            os.close(started_r)
            reply = socket.socket(fileno=fds[0])
            for fd in fds[1:]:
                os.close(fd)
            try:
                reply.send(json.dumps({"pid": pid}).encode())
            except OSError:
                pass
            pidfd = os.pidfd_open(pid)
            children[pidfd] = (pid, reply)
            sel.register(pidfd, selectors.EVENT_READ)


def _recv_request(control: socket.socket) -> tuple[bytes, list[int]]:
    """One queued request and its descriptors, without waiting (``socket.recv_fds`` drops
    its ``flags``, so MSG_DONTWAIT is passed to ``recvmsg`` here)."""
    import array

    message, ancdata, _flags, _addr = control.recvmsg(MESSAGE_BYTES, socket.CMSG_LEN(3 * 4), socket.MSG_DONTWAIT)
    fds = array.array("i")
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return message, list(fds)


def _pythonpath(env) -> list[str]:
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def _child(request: dict, fds: list[int], host: int, base_path: list[str], host_entries: list[str],
           started: int) -> None:
    """In the forked child: become the script's own process, run it as ``__main__``, exit."""
    code = 1
    try:
        os.setsid()  # its own process group: the caller kills it (and anything it starts) as one
        die_with_parent(host)
        os.write(started, b"s")
        os.close(started)
        os.close(fds[0])
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        for fd, target in zip(fds[1:], (1, 2)):
            if fd != target:
                os.dup2(fd, target)
                os.close(fd)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = request["argv"][1:]
        script = os.path.realpath(argv[0])
        entries = _pythonpath(request["env"])
        sys.path[:] = [os.path.dirname(script), *entries, *(p for p in base_path if p not in host_entries)]
        sys.argv[:] = argv
        import importlib

        importlib.invalidate_caches()  # files added since the host started are seen
        if "numpy" in sys.modules:  # a fresh process would draw its own seed
            sys.modules["numpy"].random.seed()
        import runpy

        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except BaseException:  # noqa: BLE001 - printed as the interpreter would, then exit 1
            import traceback

            traceback.print_exc()
            code = 1
        import atexit

        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed pipe: nothing more to say
                pass
        os._exit(code)


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1

