"""The explorer's network edge: the listening socket, the Host names it answers, and its connections' deadlines.

    open_socket(host, port)        a listening socket; a bad host, a taken port and a refused one said apart
    allowed_hosts(host, bound)     the Host header names a server bound there answers (DNS rebinding: no other)
    is_loopback(address)           whether an address is this machine only (127.0.0.0/8, ::1)
    HostCheck                      the ASGI middleware that refuses any other Host header (HTTP 400, one line)
    guarded_protocol(limits)       uvicorn's HTTP protocol with deadlines on the headers, the body and an unread
                                   answer, and a cap on open connections (`Limits`)

What a request may ask, and how its body is read, lives in `requests.py` and `server.py`; nothing here knows the
API.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import json
import socket

from hardmax.explore.requests import Limits

__all__ = ["LOCAL_HOSTS", "HostCheck", "allowed_hosts", "guarded_protocol", "is_loopback", "open_socket"]

#: The Host names of this machine seen from itself (IPv6 literals are bracketed in a Host header).
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def is_loopback(address: str) -> bool:
    """Whether `address` (an IP literal, IPv6 bracketed or not) reaches this machine only: 127.0.0.0/8, ::1, and an
    IPv4-mapped loopback address. A name is not an address: False."""
    ip = _address(address)
    if ip is None:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def _host_name(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    return f"[{ip.compressed}]" if ip.version == 6 else ip.compressed


def _own_addresses() -> set[str]:
    """This machine's names and addresses, found cheaply: its host name and FQDN, what they resolve to, and the
    addresses of the interfaces an outgoing route would use (a UDP socket `connect`s without sending anything)."""
    found: set[str] = set()
    names = set()
    for name in (socket.gethostname, socket.getfqdn):
        try:
            names.add(name().lower())
        except OSError:
            pass
    for name in names - {""}:
        found.add(name)
        try:
            found |= {_host_name(ipaddress.ip_address(info[4][0].split("%", 1)[0]))
                      for info in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)}
        except (OSError, ValueError):
            pass
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):  # documentation nets
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                udp.connect((probe, 9))
                found.add(_host_name(ipaddress.ip_address(udp.getsockname()[0].split("%", 1)[0])))
        except (OSError, ValueError):
            pass
    return found


def allowed_hosts(host: str, bound: str) -> tuple[str, ...]:
    """The Host header names (ports aside) a server started with `--host host` and bound to the address `bound`
    answers: the name given (when it is a name), the bound address, and

    - for every interface (0.0.0.0, ::): the loopback names, this machine's host name and FQDN and the addresses
      they resolve to, and the addresses of its outgoing interfaces;
    - for a loopback address (127.0.0.2 as much as 127.0.0.1): the loopback names;
    - for any other address: nothing more.

    A DNS-rebinding page names its own domain, which none of these is, so it cannot drive the API.
    """
    names = set()
    given = host.strip().lower()
    if given and _address(given) is None:
        names.add(given)
    ip = _address(bound)
    if ip is None:
        raise ValueError(f"not an IP address: {bound!r}")
    names.add(_host_name(ip))
    if ip.is_unspecified:
        names |= set(LOCAL_HOSTS) | _own_addresses()
    elif is_loopback(bound):
        names |= set(LOCAL_HOSTS)
    return tuple(sorted(names))


class HostCheck:
    """ASGI middleware: a request whose Host header is not one of `hosts` (any port) gets HTTP 400 with one JSON line,
    as does one with no Host header or several. `hosts` holding "*" answers every Host."""

    def __init__(self, app, hosts: tuple[str, ...]):
        self.app, self.hosts = app, frozenset(h.lower() for h in hosts)
        self.any = "*" in self.hosts

    def allows(self, value: bytes | None) -> bool:
        """Whether the Host header `value` names this server: one of `hosts`, optionally with a numeric port."""
        if value is None:
            return False
        try:
            text = value.decode("ascii").lower()
        except UnicodeDecodeError:
            return False
        if text in self.hosts:
            return True
        name, colon, port = text.rpartition(":")
        return bool(colon) and port.isascii() and port.isdigit() and len(port) <= 5 and name in self.hosts

    async def __call__(self, scope, receive, send) -> None:
        if self.any or scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        found = [v for k, v in scope["headers"] if k == b"host"]
        if len(found) == 1 and self.allows(found[0]):
            return await self.app(scope, receive, send)
        body = json.dumps({"error": "the Host header does not name this server (requests from another site's page "
                                    "are refused): open it by the address it printed"}).encode()
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def open_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one; a name: its first address, IPv4 first), whose
    connections send without delay (TCP_NODELAY).

    Raises OSError with one line that says which of these went wrong: the host is not an address or a name this
    machine resolves; the address is not one of this machine's; the port is taken; the port needs privileges.
    """
    if not host.strip():
        raise OSError("--host is empty: give an address (127.0.0.1, 0.0.0.0 for every interface) or a name")
    try:
        found = socket.getaddrinfo(host.strip("[]"), port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0,
                                   socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        reason = e.strerror if isinstance(e, socket.gaierror) and e.strerror else str(e)
        raise OSError(f"--host {host!r} is not an address or a name this machine can resolve ({reason})") from None
    except OverflowError:
        raise OSError(f"--port must be in 0..65535, got {port}") from None
    family, kind, _, _, address = sorted(found, key=lambda info: info[0] != socket.AF_INET)[0]
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say so, and without it a kept-alive
    # connection's answer (headers, then body) waited ~40 ms for the client's delayed ACK (Nagle)
    sock = socket.socket(family, kind, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        shown = f"[{address[0]}]" if ":" in address[0] else address[0]
        where = f"{shown}:{port}" if host.strip("[]") == address[0] else f"{host}:{port} ({shown})"
        if e.errno == errno.EADDRINUSE:
            raise OSError(f"cannot listen on {where}: the port is in use; choose another --port") from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise OSError(f"cannot listen on {where}: permission denied (ports below 1024 need privileges); "
                          "choose a --port of 1024 or more") from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise OSError(f"cannot listen on {where}: the address is not one of this machine's; use 127.0.0.1, "
                          "0.0.0.0 (every interface) or an address of one of its interfaces") from None
        raise OSError(f"cannot listen on {where} ({e.strerror or e})") from None
    sock.listen(128)
    return sock


def _reply(status: int, reason: str, message: str) -> bytes:
    body = json.dumps({"error": message}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n").encode("ascii") + body


def guarded_protocol(limits: Limits) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol (the one it picks itself) with the deadlines and the cap of `limits`:

    - a request's headers must arrive within `limits.header_seconds` of the connection opening or of the previous
      answer, else the connection is closed (a client that sends half a request holds nothing for long);
    - its body within `limits.body_seconds` of its headers, else HTTP 408 and the connection closed (the app's
      read of it ends as a client that left);
    - an answer the client does not read for `limits.write_seconds` is dropped with its connection;
    - beyond `limits.connections` open connections a new one is answered HTTP 503 at once and closed.
    """
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class Guarded(AutoHTTPProtocol):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._header = self._body = self._write = None  # the deadlines running (asyncio.TimerHandle)
            self._watched = None  # the request whose body is timed
            self._refused = False

        def connection_made(self, transport) -> None:
            if len(self.connections) >= limits.connections:
                self._refused = True
                transport.write(_reply(503, "Service Unavailable", f"the server has {limits.connections} "
                                       "connections open, its most; try again"))
                if transport.can_write_eof():
                    transport.write_eof()  # the answer, then the client's own close (no reset that loses it)
                self._write = self.loop.call_later(1.0, transport.abort)
                return
            super().connection_made(transport)
            self._header = self.loop.call_later(limits.header_seconds, self._headers_late, None)

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            super().data_received(data)
            if self.cycle is not self._watched:
                self._started()

        def eof_received(self):
            if self._refused:
                return False
            return super().eof_received()

        def _started(self) -> None:
            """A request's headers are in: its body is timed from now (when it has one)."""
            self._watched = cycle = self.cycle
            if self._body is not None:
                self._body.cancel()
                self._body = None
            if cycle is not None and cycle.more_body:
                self._body = self.loop.call_later(limits.body_seconds, self._body_late, cycle)

        def on_response_complete(self) -> None:
            done = self.cycle
            super().on_response_complete()
            if self.transport.is_closing():
                return
            if self._header is not None:
                self._header.cancel()
            self._header = self.loop.call_later(limits.header_seconds, self._headers_late, done)
            if self.cycle is not self._watched:  # a pipelined request started at once
                self._started()

        def _headers_late(self, before) -> None:
            self._header = None
            if self.cycle is before and not self.transport.is_closing():  # no request began in time
                self.transport.close()

        def _body_late(self, cycle) -> None:
            self._body = None
            if self.cycle is not cycle or not cycle.more_body or cycle.response_complete:
                return
            if self.transport.is_closing():
                return
            if not cycle.response_started:
                self.transport.write(_reply(408, "Request Timeout", f"the request's body did not arrive within "
                                            f"{limits.body_seconds:g} s"))
            cycle.disconnected = True  # the app's read ends, and what it sends is dropped
            cycle.message_event.set()
            self.transport.close()

        def pause_writing(self) -> None:
            if self._refused:
                return
            super().pause_writing()
            if self._write is None:
                self._write = self.loop.call_later(limits.write_seconds, self.transport.abort)

        def resume_writing(self) -> None:
            if self._refused:
                return
            super().resume_writing()
            if self._write is not None:
                self._write.cancel()
                self._write = None

        def connection_lost(self, exc) -> None:
            for timer in (self._header, self._body, self._write):
                if timer is not None:
                    timer.cancel()
            self._header = self._body = self._write = None
            if not self._refused:
                super().connection_lost(exc)

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{AutoHTTPProtocol.__name__}"
    return Guarded
