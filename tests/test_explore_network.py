"""Tests of `hardmax.explore.network`, the explorer's network edge: deadlines on headers, bodies and unread
answers, the connection cap, the Host names answered (DNS rebinding refused), the listening socket (its errors
said apart, TCP_NODELAY) and the warning for addresses other machines reach.

Helpers (raw connections to a live server) in explore_server.py.
"""

from __future__ import annotations

import json

import pytest
from explore_server import HEAD, SQUARE, Client, LiveServer, one_response, raw_connection, settled

from hardmax.explore import Limits, create_app

pytestmark = pytest.mark.usefixtures("one_thread")


def _until_closed(sock) -> bytes:
    """Everything the server sends until it closes the connection (socket.timeout if it never does)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_half_sent_request_is_closed_within_the_header_deadline():
    """A connection that sends nothing, or half a request's headers, is closed after `Limits.header_seconds`; so is
    a kept-alive connection whose next request stops half-way (before: held until the client left)."""
    import time

    with LiveServer(create_app(None, Limits(header_seconds=0.5))) as server:
        for sent in (b"", b"POST /api/simulate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty", b"GET /api/pre"):
            start = time.monotonic()
            with raw_connection(server, sent) as sock:
                assert _until_closed(sock) == b""
            assert time.monotonic() - start < 4.0
        with raw_connection(server, b"GET /api/presets HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") as sock:
            status, _ = one_response(sock)
            assert status == 200
            start = time.monotonic()
            sock.sendall(b"GET /api/presets HTTP/1.1\r\nHo")
            assert _until_closed(sock) == b"" and time.monotonic() - start < 4.0
        assert settled(server)


def test_a_stalled_body_is_answered_408_and_nothing_is_held():
    """Bodies that stop half-way are answered 408 after `Limits.body_seconds`, their connections closed and the
    request tasks (with what they had read) gone; the server answers the next request as before."""
    with LiveServer(create_app(None, Limits(body_seconds=0.5))) as server:
        stalled = [raw_connection(server, HEAD % 100_000 + b'{"tokens": [' + b" " * 50_000) for _ in range(8)]
        for sock in stalled:
            status, body = one_response(sock)
            assert status == 408 and "did not arrive within 0.5 s" in json.loads(body)["error"]
            assert _until_closed(sock) == b""
            sock.close()
        assert settled(server)
        assert Client(server.url).post("/api/simulate", json={"tokens": SQUARE}).status_code == 200


def test_connections_beyond_the_cap_are_answered_503():
    with LiveServer(create_app(None, Limits(connections=3))) as server:
        held = [raw_connection(server) for _ in range(3)]
        import time

        deadline = time.monotonic() + 10
        while len(server.server.server_state.connections) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        with raw_connection(server, b"GET /api/presets HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") as extra:
            reply = _until_closed(extra)
        assert reply.startswith(b"HTTP/1.1 503") and b"connections open" in reply
        for sock in held:
            sock.close()
        assert settled(server)
        assert Client(server.url).get("/api/presets").status_code == 200


def test_an_answer_left_unread_is_dropped(monkeypatch):
    """A client that asks for a large answer and never reads it holds it for `Limits.write_seconds`, not for ever."""
    from hardmax.explore import views

    monkeypatch.setattr(views, "playground_view", lambda request, encode: {"value": "x" * 16_000_000})
    with LiveServer(create_app(None, Limits(write_seconds=0.5))) as server:
        body = json.dumps({"tokens": SQUARE}).encode()
        with raw_connection(server, HEAD % len(body) + body, receive_buffer=4096):
            assert settled(server, 20.0)


def test_the_host_names_answered_follow_the_bound_address(monkeypatch):
    """Loopback addresses answer the loopback names; every interface adds this machine's own names and addresses;
    another address answers itself only. Never every Host (before: any --host but three turned the check off)."""
    import socket

    from hardmax.explore.network import HostCheck, allowed_hosts, is_loopback

    assert allowed_hosts("127.0.0.2", "127.0.0.2") == ("127.0.0.1", "127.0.0.2", "[::1]", "localhost")
    assert allowed_hosts("::1", "::1") == ("127.0.0.1", "[::1]", "localhost")
    assert allowed_hosts("10.1.2.3", "10.1.2.3") == ("10.1.2.3",)
    assert allowed_hosts("Box.Example", "10.1.2.3") == ("10.1.2.3", "box.example")
    monkeypatch.setattr(socket, "gethostname", lambda: "box")
    monkeypatch.setattr(socket, "getfqdn", lambda: "box.lab.example")
    every = allowed_hosts("0.0.0.0", "0.0.0.0")
    assert {"127.0.0.1", "localhost", "[::1]", "0.0.0.0", "box", "box.lab.example"} <= set(every)
    assert "*" not in every and "attacker.example" not in every
    assert [is_loopback(a) for a in ("127.0.0.2", "::1", "[::1]", "::ffff:127.0.0.1", "0.0.0.0", "10.0.0.1",
                                     "localhost")] == [True, True, True, True, False, False, False]
    check = HostCheck(None, every)
    for value in (b"box", b"BOX:8765", b"localhost:1", b"[::1]:8765", b"127.0.0.1", b"0.0.0.0:80"):
        assert check.allows(value), value
    for value in (b"attacker.example", b"box.attacker.example", b"localhost.", b"localhost:", b"localhost:http",
                  b"::1", b"127.0.0.1:8765:1", b"localhost:\xd9\xa1", b"", None, b"127.0.0.1 ", b"box:123456"):
        assert not check.allows(value), value


def test_every_interface_refuses_a_rebinding_host():
    from hardmax.explore.network import allowed_hosts

    app = create_app(None, hosts=allowed_hosts("0.0.0.0", "0.0.0.0"))
    with LiveServer(app, host="0.0.0.0") as server:
        client = Client(f"http://127.0.0.1:{server.port}")
        for host, status in ((f"localhost:{server.port}", 200), ("127.0.0.1", 200), ("attacker.example", 400),
                             (f"attacker.example:{server.port}", 400)):
            answer = client.post("/api/attention", json={"tokens": SQUARE},
                                 headers={"content-type": "application/json", "host": host})
            assert answer.status_code == status, host
        assert "Host header" in answer.json()["error"]


def _explore(monkeypatch, capsys, *args) -> tuple[int, str, dict]:
    """`hardmax explore ARGS` without serving: the app it would serve, its exit code and what it printed."""
    from hardmax.cli import main
    from hardmax.explore import server

    served = {}
    monkeypatch.setattr(server, "warm_up", lambda: None)
    monkeypatch.setattr(server, "serve", lambda app, sock, on_ready=None: served.update(app=app, sock=sock))
    code = main(["explore", "--no-browser", "--runs", "/nonexistent", *args])
    if "sock" in served:
        served["sock"].close()
    out = capsys.readouterr()
    return code, out.out + out.err, served


def test_explore_warns_only_for_addresses_other_machines_reach(monkeypatch, capsys):
    for host, warned in (("127.0.0.2", False), ("localhost", False), ("0.0.0.0", True)):
        code, printed, served = _explore(monkeypatch, capsys, "--host", host, "--port", "0")
        assert code == 0 and ("reachable from other machines" in printed) is warned, (host, printed)
        hosts = served["app"].user_middleware[0].kwargs["hosts"]
        assert "*" not in hosts and "localhost" in hosts


def test_explore_says_what_is_wrong_with_the_address(monkeypatch, capsys):
    """A host that is no address, a port in use and a port refused are three different messages (before: all
    "choose another --port")."""
    import errno
    import socket

    code, printed, _ = _explore(monkeypatch, capsys, "--host", "not a host", "--port", "0")
    assert code == 2 and "not an address or a name" in printed and "--port" not in printed
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        code, printed, _ = _explore(monkeypatch, capsys, "--port", str(taken.getsockname()[1]))
        assert code == 2 and "in use; choose another --port" in printed

    class Refused(socket.socket):
        def bind(self, address):
            raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("hardmax.explore.network.socket.socket", Refused)
    code, printed, _ = _explore(monkeypatch, capsys, "--port", "80")
    assert code == 2 and "permission denied" in printed and "1024" in printed


def test_connections_send_without_delay():
    """The listening socket says it is TCP, so each connection gets TCP_NODELAY (before: proto 0, Nagle on, and an
    answer on a kept-alive connection waited for the client's delayed ACK, ~40 ms)."""
    import socket
    import time

    asked = b"GET /api/presets HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with LiveServer(create_app(None)) as server, raw_connection(server, asked) as sock:
        assert one_response(sock)[0] == 200
        deadline = time.monotonic() + 10
        while not server.server.server_state.connections and time.monotonic() < deadline:
            time.sleep(0.02)
        (connection,) = server.server.server_state.connections
        accepted = connection.transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
