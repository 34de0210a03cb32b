"""``tether-py``: ``req`` and ``sse``, with the JSON lines contract of ``tether req`` and
``tether sse``.

One JSON object per line on stdout, diagnostics on stderr. Exit codes: 0 done (``--until-eose``,
``--duration``, SIGINT/SIGTERM, the server's 204), 1 failure, 2 bad arguments (one
``tether: ...`` line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import re
import signal
import ssl
import sys
import time
from pathlib import Path

from ._ffi import Pool, Relay, Sse, TetherError, normalize_url
from .driver import AttemptInfo, RelayDriver, SseDriver, check_url
from .pool_driver import PoolDriver
from .state import StateError, StateFile, canonical_filter

SAVE_EVERY = 1.0

DEFAULT_FILTER = '{"limit":10}'
HEADER_CMD_LIMIT = 10.0


class Usage(Exception):
    """The command line cannot be used: exit 2."""


class Failed(Exception):
    """It ran and failed: exit 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise Usage(message)


def _secs(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 0 or more seconds")
    return value


def _u64(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 2**64:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range")
    return value


_REQ_LINES = (
    "Output, one JSON object per line on stdout, with the fields of `tether req`: connected, "
    "disconnected, event, eose, caught_up, closed, notice, auth, retrying, queued, "
    "eose_timeout, rate_limited, subscription_limit, authenticated, auth_failed, "
    "signer_failed, peer_error; with several relays (or --verify) every line about one relay "
    "carries relay, and each subscription gets complete, ended once no relay serves it, and "
    "invalid for a forgery (--verify); with --outbox, routed whenever its routes change. "
    "Exit codes: 0 done, 1 failure, 2 bad arguments."
)
"""What ``tether-py req --help`` says it writes: every line type of the contract."""


def _parser() -> _Parser:
    parser = _Parser(prog="tether-py", description="tether over its C ABI, from Python")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    req = commands.add_parser("req", help="keep subscriptions open on a relay", epilog=_REQ_LINES)
    req.add_argument("url", nargs="?")
    req.add_argument("filters", nargs="*", metavar="FILTER_JSON")
    req.add_argument(
        "--outbox",
        action="store_true",
        help="subscribe to people, not relays: route each filter's authors (or its one #p "
        "key, an inbox) to their relays; takes no relay URL",
    )
    req.add_argument(
        "--indexer",
        action="append",
        default=[],
        metavar="URL",
        help="with --outbox: fetch relay lists from this relay (repeatable; replaces the "
        "default indexers)",
    )
    req.add_argument(
        "--max-relays",
        type=_u64,
        metavar="N",
        help="with --outbox: most relays connected at once, the indexers included [20]",
    )
    req.add_argument("--until-eose", action="store_true")
    req.add_argument("--seed", type=_u64)
    req.add_argument("--secret-key", metavar="HEX")
    req.add_argument("--max-subscriptions", type=_u64)
    req.add_argument("--verify", action="store_true")
    req.add_argument("--eose-timeout", type=_secs)
    req.add_argument("--duration", type=_secs)
    req.add_argument("--state", metavar="FILE", help="resume from FILE and keep it current")
    req.add_argument(
        "--cacert",
        action="append",
        default=[],
        metavar="FILE",
        help="also trust the CA certificates in this PEM file for wss:// relays",
    )
    req.add_argument(
        "--native-roots",
        action="store_true",
        help="trust the platform's store (Python's default context always does)",
    )
    sse = commands.add_parser("sse", help="stream a Server-Sent Events endpoint")
    sse.add_argument("url")
    sse.add_argument("-H", "--header", action="append", default=[], dest="headers")
    sse.add_argument("-X", "--request", dest="method", metavar="METHOD")
    sse.add_argument("-d", "--data", metavar="BODY|@FILE")
    sse.add_argument(
        "--resume",
        metavar="POLICY",
        help="never, same, last-event-id[:METHOD] or reissue[:N] (the core decides)",
    )
    sse.add_argument("--mcp", metavar="REVISION", help="2025-11-25 or 2026-07-28")
    sse.add_argument("--end-data", metavar="DATA")
    sse.add_argument("--end-event", metavar="EVENT")
    sse.add_argument("--fail-event", metavar="EVENT")
    sse.add_argument("--idle-timeout", type=_secs)
    sse.add_argument("--proxy", metavar="URL|none")
    sse.add_argument("--seed", type=_u64)
    sse.add_argument("--duration", type=_secs)
    sse.add_argument("--state", metavar="FILE", help="resume from FILE and keep it current")
    sse.add_argument(
        "--header-cmd",
        metavar="CMD",
        help="run CMD (through sh) before each request and send the 'Name: value' lines it "
        "prints as that request's headers, in place of any -H of the same name; "
        "TETHER_ATTEMPT and TETHER_AFTER are set for it; a CMD that fails, prints something "
        f"else or runs past {HEADER_CMD_LIMIT:g} s fails the stream (kind invalid_request)",
    )
    return parser


class _Lines:
    """JSON lines on stdout, flushed one by one; a closed pipe ends the run quietly."""

    closed = False

    def write(self, line: dict) -> None:
        self.write_raw(json.dumps(line, separators=(",", ":"), ensure_ascii=False))

    def write_raw(self, text: str) -> None:
        if self.closed:
            return
        try:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            self.closed = True


def _seed(seed: int | None) -> int:
    if seed is not None:
        return seed
    import os

    return int.from_bytes(os.urandom(8), "little")


def _install_stop(loop: asyncio.AbstractEventLoop, stop) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)


def _install_lifecycle(loop: asyncio.AbstractEventLoop, driver) -> None:
    """Ctrl-Z is a suspend: the session is told, then the process stops itself with SIGSTOP
    (SIGTSTP's default action is discarded in an orphaned process group; SIGSTOP is not).
    SIGCONT is a resume, whose probe finds a socket that died meanwhile."""
    import os

    from ._ffi import LIFECYCLE_RESUMED, LIFECYCLE_SUSPENDED

    def suspend() -> None:
        driver.session.lifecycle(driver.now(), LIFECYCLE_SUSPENDED)
        os.kill(os.getpid(), signal.SIGSTOP)

    def resume() -> None:
        driver.session.lifecycle(driver.now(), LIFECYCLE_RESUMED)
        driver.inbox.put_nowait(("wake",))

    loop.add_signal_handler(signal.SIGTSTP, suspend)
    loop.add_signal_handler(signal.SIGCONT, resume)


# ----- req ---------------------------------------------------------------------------------


def _relay_url(url: str) -> str:
    try:
        return check_url(url, ("ws", "wss"))
    except ValueError as error:
        raise Usage(str(error)) from None


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The context for wss:// relays: ``--cacert`` files trusted beside the platform's
    store, or ``None`` for Python's default (which trusts the platform's store already, so
    ``--native-roots`` changes nothing here)."""
    if not args.cacert:
        return None
    context = ssl.create_default_context()
    for path in args.cacert:
        try:
            context.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as error:
            raise Usage(f"--cacert {path}: {error}") from None
    return context


# Not printed by `req`, which publishes nothing.
_PUBLISH = ("published", "rejected", "publish_done")


def _line(event: dict, labels: dict, urls: dict | None) -> str | None:
    """The core's line (as the ABI hands it) as ``tether req`` prints it: a subscription by
    its filter argument's index, a relay by its URL (``urls`` None: one relay, no field),
    without the handles only a host that answers needs (the ids of ``event`` and ``auth``).
    ``None`` for a subscription this run does not name."""
    out: dict = {}
    for key, value in event.items():
        if key == "raw" or (key == "id" and event["type"] in ("event", "auth")):
            continue
        if key == "sub":
            if value not in labels:
                return None
            value = labels[value]
        elif key == "relay":
            if urls is None:
                continue
            value = urls.get(value, "")
        elif key == "missing" and urls is not None:
            value = [urls.get(relay, "") for relay in value]
        out[key] = value
    if event["type"] != "event":
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False)
    # The relay's bytes as the ABI hands them (verbatim: its objects are length-delimited),
    # made line-safe as the core makes the CLI's (`Labels::lines`): a line break would split
    # the line, so such an event is written compactly.
    del out["event"]
    raw = event["raw"]
    if "\n" in raw or "\r" in raw:
        raw = json.dumps(event["event"], separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    head = json.dumps(out, separators=(",", ":"), ensure_ascii=False)
    return head[:-1] + ',"event":' + raw + "}"


class _Req:
    def __init__(self, args: argparse.Namespace, filters: list[str]) -> None:
        self.args = args
        self.out = _Lines()
        self.labels: dict = {}
        self.done: dict = {}
        self.ended: dict = {}
        # Restored with a gap: done at its caught_up, which follows the EOSE.
        self.catching_up: dict = {}
        self.dirty = False
        self.driver: RelayDriver | None = None

    def on_event(self, event: dict, now: int) -> None:
        kind, sub = event["type"], event.get("sub")
        self.dirty = True
        if kind in _PUBLISH:
            return
        if kind == "eose" and not self.catching_up.get(sub) or kind == "caught_up":
            self.done[sub] = True
        elif kind == "closed":
            self.done[sub] = True
            self.ended[sub] = True
        line = _line(event, self.labels, None)
        if line is not None:
            self.out.write_raw(line)
        if self.out.closed and self.driver is not None:
            self.driver.stop()
        elif (
            kind in ("eose", "caught_up", "closed") and sub is not None and self.driver is not None
        ):
            if all(self.ended.values()):
                self.driver.stop()  # every subscription closed by the relay: nothing left
            elif self.args.until_eose and all(self.done.values()):
                self.driver.stop()


async def _run_req(args: argparse.Namespace) -> None:
    if args.outbox:
        await _run_req_outbox(args)
        return
    if args.indexer or args.max_relays is not None:
        raise Usage("--indexer and --max-relays go with --outbox")
    if args.url is None:
        raise Usage("a relay URL is required (or --outbox)")
    given = [f for f in args.filters if not f.startswith(("ws://", "wss://"))]
    filters = given or [DEFAULT_FILTER]
    _check_filters(filters)
    sign = _signer(args)
    extra = 0
    for text in args.filters:
        if not text.startswith(("ws://", "wss://")):
            break
        extra += 1
    relays = [args.url, *args.filters[:extra]]
    for url in relays:
        _relay_url(url)
    if relays != [args.url] or args.verify:
        await _run_req_pool(args, relays, args.filters[extra:] or [DEFAULT_FILTER], sign)
        return
    url = _relay_url(args.url)
    state = StateFile(args.state, "req", [args.url]) if args.state else None
    loaded = _load(state)
    seed, most = _seed(args.seed), args.max_subscriptions or 0
    remembered: list[tuple[str, int]] = []
    live_before: set = set()
    if state is not None and loaded is not None:
        remembered, checkpoint = loaded
        try:
            relay = Relay.restore(
                checkpoint, 0, int(time.time()), seed=seed, max_subscriptions=most
            )
        except TetherError as error:
            raise Usage(str(state.refuse(error.message))) from None
        saved = json.loads(checkpoint)
        live_before = {s["id"] for s in saved["subscriptions"] if s.get("live_from") is not None}
        restored = {s["id"] for s in saved["subscriptions"]}
        remembered = [(f, i) for f, i in remembered if i in restored]
    else:
        relay = Relay(seed=seed, max_subscriptions=most)
    run = _Req(args, filters)
    driver = RelayDriver(url, relay, run.on_event, sign, tls=_tls(args))
    run.driver = driver
    relay.set_wall_clock(driver.now(), int(time.time()))
    subs = []
    keys = []
    for index, text in enumerate(filters):
        key = canonical_filter(text)
        match = next((i for i, (f, _) in enumerate(remembered) if f == key), None)
        if match is not None:
            sub = remembered.pop(match)[1]
            run.catching_up[sub] = sub in live_before
        else:
            sub = relay.subscribe(driver.now(), "[" + text + "]")
        subs.append(sub)
        keys.append(key)
        run.labels[sub] = str(index)
        run.done[sub] = False
        run.ended[sub] = False
    # Remembered subscriptions whose filter is no longer given are dropped.
    for _, sub in remembered:
        relay.unsubscribe(driver.now(), sub)

    await _drive(args, driver, run, state, list(zip(keys, subs)), relay.checkpoint)


def _distinct(relays: list[str]) -> list[str]:
    """Each relay once, in the order given (as the pool was given them: its relay ids)."""
    seen: set = set()
    out = []
    for url in relays:
        try:
            key = normalize_url(url)
        except TetherError:
            key = url
        if key not in seen:
            seen.add(key)
            out.append(url)
    return out


class _PoolReq:
    """``tether-py req`` over several relays (or with ``--verify``): the lines of
    ``tether req``'s pool run, each about one relay naming it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = _Lines()
        self.urls: dict[int, str] = {}
        self.labels: dict[int, str] = {}
        self.complete: dict[int, bool] = {}
        self.ended: dict[int, bool] = {}
        # A restored subscription: the relays that caught it up or gave up.
        self.answered: dict[int, set] = {}
        self.dirty = False
        self.driver: PoolDriver | None = None

    def _answered_by(self, sub: int, relay: int) -> None:
        answered = self.answered.get(sub)
        if answered is None:
            return
        answered.add(relay)
        if len(answered) >= len(self.urls):
            self.complete[sub] = True

    def restored_deadline(self) -> None:
        for sub in self.answered:
            self.complete[sub] = True
        self._maybe_stop()

    def _maybe_stop(self) -> None:
        if self.driver is None:
            return
        every_ended = bool(self.ended) and all(self.ended.values())
        done = self.args.until_eose and all(self.complete.values())
        if self.out.closed or every_ended or done:
            self.driver.stop()

    def on_event(self, event: dict, now: int) -> None:
        self.dirty = True
        kind, sub = event["type"], event.get("sub")
        if kind in ("caught_up", "closed") and sub in self.labels:
            self._answered_by(sub, event["relay"])
        elif kind == "complete":
            self.complete[sub] = True
        elif kind == "ended":
            self.ended[sub] = True
            self.complete[sub] = True
        line = None if kind in _PUBLISH else _line(event, self.labels, self.urls)
        if line is not None:
            self.out.write_raw(line)
        self._maybe_stop()


def _signer(args: argparse.Namespace):
    """``--secret-key``'s NIP-42 signer, or ``None``."""
    if args.secret_key is None:
        return None
    from .keys import SecretKey

    try:
        key = SecretKey(args.secret_key)
    except ValueError as error:
        raise Usage(str(error)) from None
    return key.sign_auth


async def _run_req_outbox(args: argparse.Namespace) -> None:
    """``req --outbox``: the pool routes each filter to its people's relays."""
    filters = list(args.filters)
    if args.url is not None:
        if args.url.startswith(("ws://", "wss://")):
            raise Usage(
                "--outbox takes no relay URL: its relays come from the people's relay lists"
            )
        filters.insert(0, args.url)
    if not filters:
        raise Usage("--outbox needs a filter naming people (`authors`, or one `#p` key)")
    _check_filters(filters)
    for url in args.indexer:
        try:
            check_url(url, ("ws", "wss"))
        except ValueError as error:
            raise Usage(f"--indexer: {error}") from None
    if args.max_relays == 0:
        raise Usage("--max-relays must be at least 1")
    config: dict = {}
    if args.indexer:
        config["outbox_indexers"] = args.indexer
    if args.max_relays is not None:
        config["outbox_max_relays"] = args.max_relays
    # The state file is this run's: its targets name the mode and the indexers given.
    targets = ["outbox", *args.indexer]
    await _run_req_pool(args, targets, filters, _signer(args), outbox=config)


async def _run_req_pool(
    args: argparse.Namespace,
    relays: list[str],
    filters: list[str],
    sign,
    outbox: dict | None = None,
) -> None:
    """The pool's run over ``relays``, or with ``outbox`` (its config) routed by people:
    then ``relays`` only names the run in the state file."""
    _check_filters(filters)
    config: dict = {
        "seed": _seed(args.seed),
        "max_subscriptions": args.max_subscriptions or 0,
        "verify": 1 if args.verify else 0,
        **(outbox or {}),
    }
    if args.eose_timeout is not None:
        config["eose_deadline_ms"] = max(1, int(args.eose_timeout * 1000))
    state = StateFile(args.state, "req", relays) if args.state else None
    loaded = _load(state)
    distinct = [] if outbox is not None else _distinct(relays)
    remembered: list[tuple[str, int]] = []
    if state is not None and loaded is not None:
        remembered, checkpoint = loaded
        try:
            pool = Pool.restore(checkpoint, 0, int(time.time()), **config)
        except TetherError as error:
            raise Usage(str(state.refuse(error.message))) from None
        saved = json.loads(checkpoint)
        restored = {s["id"] for s in saved["subscriptions"]}
        remembered = [(f, i) for f, i in remembered if i in restored]
    else:
        pool = Pool(**config)
    run = _PoolReq(args)
    driver = PoolDriver(pool, run.on_event, sign, tls=_tls(args))
    run.driver = driver
    pool.set_wall_clock(driver.now(), int(time.time()))
    if loaded is not None:
        for relay, url in enumerate(distinct):
            driver.adopt(relay, url)
    else:
        for url in distinct:
            driver.add_relay(url)
    run.urls = driver.urls
    subs, keys = [], []
    for index, text in enumerate(filters):
        key = canonical_filter(text)
        match = next((i for i, (f, _) in enumerate(remembered) if f == key), None)
        if match is not None:
            sub = remembered.pop(match)[1]
            # A restored routed subscription is owed its outcome again (its relays are this
            # run's); one on given relays is done once each of them answered.
            if outbox is None:
                run.answered[sub] = set()
        elif outbox is not None:
            try:
                sub = pool.subscribe_outbox(driver.now(), text)
            except TetherError as error:
                raise Usage(f"filter {index}: {error.message}") from None
        else:
            sub = pool.subscribe(driver.now(), "[" + text + "]")
        subs.append(sub)
        keys.append(key)
        run.labels[sub] = str(index)
        run.complete[sub] = False
        run.ended[sub] = False
    for _, sub in remembered:
        pool.unsubscribe(driver.now(), sub)

    if run.answered:
        deadline = args.eose_timeout if args.eose_timeout is not None else 10.0
        asyncio.get_running_loop().call_later(deadline, run.restored_deadline)
    await _drive(args, driver, run, state, list(zip(keys, subs)), pool.checkpoint)


async def _drive(args, driver, run, state: StateFile | None, subs: list, checkpoint) -> None:
    """Drive ``driver`` until it stops (the run's end, ``--duration``, a signal), keeping
    ``--state`` current every second while anything changed; then save, unsubscribe what
    did not end and shut down. ``subs`` are ``(filter key, id)``; ``checkpoint()`` gives the
    session's bytes."""

    def save() -> None:
        if state is None:
            return
        live = [(k, s) for k, s in subs if not run.ended[s]]
        try:
            state.store(live, checkpoint())
        except OSError as error:
            print(f"tether: --state not written: {error}", file=sys.stderr)

    loop = asyncio.get_running_loop()
    _install_stop(loop, driver.stop)
    _install_lifecycle(loop, driver)
    if args.duration is not None:
        loop.call_later(args.duration, driver.stop)
    if state is not None:
        _every(loop, SAVE_EVERY, lambda: run.dirty, lambda: (setattr(run, "dirty", False), save()))
    await driver.run()
    # Before the shutdown unsubscribes: the state keeps the subscriptions.
    save()
    driver.stopping = False
    await driver.shut_down([s for _, s in subs if not run.ended[s]])


def _check_filters(filters: list[str]) -> None:
    """Each filter is a JSON object, or a usage error naming it."""
    for index, text in enumerate(filters):
        try:
            value = json.loads(text)
        except ValueError as error:
            raise Usage(f"filter {index} is not a JSON object ({error}): {text}") from None
        if not isinstance(value, dict):
            raise Usage(f"filter {index} is not a JSON object (not an object): {text}")


def _load(state: StateFile | None):
    if state is None:
        return None
    try:
        return state.load()
    except StateError as error:
        raise Usage(str(error)) from None


def _every(loop: asyncio.AbstractEventLoop, period: float, due, act) -> None:
    """Run ``act`` every ``period`` seconds when ``due()`` says so."""

    def tick() -> None:
        if due():
            act()
        loop.call_later(period, tick)

    loop.call_later(period, tick)


# ----- sse ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _headers(args: list[str]) -> list[tuple[str, str]]:
    headers = []
    for arg in args:
        name, colon, value = arg.partition(":")
        if not colon:
            raise Usage(f"header {arg!r}: expected 'Name: value'")
        name, value = name.strip(), value.strip()
        if not _TOKEN.match(name):
            raise Usage(f"header {arg!r}: not a valid header name")
        if any(ord(c) < 0x20 and c != "\t" or ord(c) == 0x7F for c in value):
            raise Usage(f"header {arg!r}: not a valid header value")
        headers.append((name, value))
    return headers


def _proxy(proxy: str | None) -> str | None:
    """``--proxy``: ``none``, or an http:// proxy URL (what aiohttp can speak to)."""
    if proxy is None or proxy == "none":
        return proxy
    if not proxy.startswith("http://"):
        raise Usage(f"--proxy {proxy}: expected none or an http:// proxy URL")
    return proxy


def _sse_url(url: str) -> str:
    try:
        return check_url(url, ("http", "https"))
    except ValueError as error:
        raise Usage(str(error)) from None


class _SseRun:
    def __init__(self, sse: Sse) -> None:
        self.sse = sse
        self.out = _Lines()
        self.driver: SseDriver | None = None
        self.failed: str | None = None

    def on_event(self, event: dict, now: int) -> None:
        kind = event["type"]
        assert self.driver is not None
        if kind == "peer_error":
            print(f"tether: the server sent something wrong: {event}", file=sys.stderr)
        # A local close is this run's own stop: `tether sse` prints no line for it.
        if not (kind == "closed" and event["reason"] == "closed"):
            self.out.write(event)
        if kind == "failed":
            self.failed = event["reason"]
        if kind in ("failed", "ended", "closed") or self.out.closed:
            self.driver.stop()


def _header_cmd(cmd: str):
    """``--header-cmd CMD`` as a per-attempt builder: CMD's ``Name: value`` lines."""
    import os
    import subprocess

    def build(info: AttemptInfo) -> list[tuple[str, str]]:
        env = dict(os.environ, TETHER_ATTEMPT=str(info.number), TETHER_AFTER=info.after or "")
        try:
            # Its own process group: a timeout ends CMD and whatever it started, so no
            # leftover child keeps the pipe (and this call) open.
            child = subprocess.Popen(
                ["sh", "-c", cmd],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as error:
            raise ValueError(f"--header-cmd: {error}") from None
        try:
            out, _ = child.communicate(timeout=HEADER_CMD_LIMIT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            raise ValueError(f"--header-cmd ran past {HEADER_CMD_LIMIT:g}s") from None
        if child.returncode != 0:
            raise ValueError(f"--header-cmd exited with {child.returncode}")
        try:
            text = out.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("--header-cmd printed something that is not UTF-8") from None
        try:
            return _headers([line for line in text.splitlines() if line.strip()])
        except Usage as usage:
            raise ValueError(f"--header-cmd: {usage}") from None

    return build


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An RFC 9110 token: what an HTTP method is."""


def _sse_request(args: argparse.Namespace, headers: list) -> dict:
    """The request ``tether_sse_new_request`` takes, from ``-X``, ``-d``, ``-H``,
    ``--resume`` and the end rules (a POST when ``-d`` is given without ``-X``)."""
    method = args.method or ("POST" if args.data is not None else "GET")
    if not _TOKEN.fullmatch(method):
        raise Usage(f"-X {method!r}: not an HTTP method")
    request: dict = {"method": method, "headers": [list(h) for h in headers]}
    if args.data is not None:
        if args.data.startswith("@"):
            try:
                request["body"] = Path(args.data[1:]).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise Usage(f"-d {args.data}: {error}") from None
        else:
            request["body"] = args.data
    for key, value in (
        ("resume", args.resume),
        ("end_data", args.end_data),
        ("end_event", args.end_event),
        ("fail_event", args.fail_event),
    ):
        if value is not None:
            request[key] = value
    if args.mcp is not None:
        request = _mcp(args).apply(request)
    return request


def _mcp(args: argparse.Namespace):
    """``--mcp``'s view of the request, or a usage error."""
    from .mcp import Mcp

    body = args.data or ""
    if body.startswith("@"):
        try:
            body = Path(body[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise Usage(f"-d {args.data}: {error}") from None
    try:
        return Mcp(args.mcp, body)
    except ValueError as error:
        raise Usage(f"--mcp {error}") from None


async def _run_sse(args: argparse.Namespace) -> None:
    headers = _headers(args.headers)
    url = _sse_url(args.url)
    idle = None
    if args.idle_timeout is not None:
        idle = int(args.idle_timeout * 1000)
    state = StateFile(args.state, "sse", [args.url]) if args.state else None
    loaded = _load(state)
    request = _sse_request(args, headers)
    if state is not None and loaded is not None:
        try:
            sse = Sse.restore(
                loaded[1], seed=_seed(args.seed), idle_timeout_ms=idle, request=request
            )
        except TetherError as error:
            raise Usage(str(state.refuse(error.message))) from None
    else:
        try:
            sse = Sse(seed=_seed(args.seed), idle_timeout_ms=idle, request=request)
        except TetherError as error:
            raise Usage(f"the request was refused ({error.message}): check --resume") from None
    run = _SseRun(sse)
    per_attempt = None if args.header_cmd is None else _header_cmd(args.header_cmd)
    # The headers are the request's now (the core keeps them for a resume); none on top.
    body_for = None if args.mcp is None else _mcp(args).body_for
    driver = SseDriver(
        url, sse, run.on_event, [], per_attempt, _proxy(args.proxy), body_for=body_for
    )
    run.driver = driver
    loop = asyncio.get_running_loop()
    _install_stop(loop, driver.stop)
    if args.duration is not None:
        loop.call_later(args.duration, driver.stop)

    def save() -> None:
        if state is None:
            return
        try:
            state.store([], sse.checkpoint())
        except OSError as error:
            print(f"tether: --state not written: {error}", file=sys.stderr)

    if state is not None:
        _every(loop, SAVE_EVERY, lambda: True, save)
    await driver.run()
    save()
    if run.failed is not None:
        raise Failed(f"{args.url}: {run.failed}")


def main(argv: list[str] | None = None) -> int:
    """The console script."""
    try:
        args = _parser().parse_args(argv)
        runner = _run_req if args.command == "req" else _run_sse
        asyncio.run(runner(args))
    except Usage as usage:
        print(f"tether: {usage}", file=sys.stderr)
        return 2
    except Failed as failed:
        print(f"tether: {failed}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"tether: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
