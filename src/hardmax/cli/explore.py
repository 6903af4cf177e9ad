"""`hardmax explore`: the explorer's server (`hardmax.explore`), started, announced and stopped."""

from __future__ import annotations

import argparse

from hardmax.cli.options import HelpFormatter

__all__ = ["add_explore", "run_explore"]


def add_explore(subparsers) -> None:
    """Register `hardmax explore` and its options on `subparsers`."""
    p = subparsers.add_parser("explore", help="the dynamics playground and the trained classifiers in a browser",
                              formatter_class=HelpFormatter,
                              description="Start a local web server with two pages: the dynamics playground "
                              "(place tokens, change α, A and the rule, watch leaders, K, S and the Theorem 2.1 "
                              "check) and the classifier (a trained run reads a review; its words move through "
                              "the layers). Everything is served from the package: it works offline. Ctrl-C "
                              "stops it.\n\nexample: hardmax explore --runs runs/quick")
    p.add_argument("--runs", default="runs", metavar="DIR",
                   help="where to look for trained runs, searched once at start (default: runs)")
    p.add_argument("--port", type=int, default=8765, help="port to listen on; 0 picks a free one (default: 8765)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address or name to bind (default: 127.0.0.1, this machine only; 0.0.0.0: every "
                        "interface). A non-loopback address is reachable from the network: a warning is printed. "
                        "Only requests addressed to this address (or, for 0.0.0.0, this machine's names and "
                        "addresses) are answered")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")


def run_explore(args: argparse.Namespace) -> int:
    """Run `hardmax explore` with the parsed `args`; returns the exit code."""
    from hardmax.explore.server import quiet_openmp

    quiet_openmp()  # before anything imports torch
    from hardmax.cli.output import say
    from hardmax.explore.network import allowed_hosts, is_loopback, open_socket
    from hardmax.explore.server import create_app, serve, warm_up

    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0..65535, got {args.port}")
    sock = open_socket(args.host, args.port)  # first: a wrong --host or --port is said before any work
    try:
        host, port = sock.getsockname()[:2]
        if not is_loopback(host):
            say(f"warning: --host {args.host} makes the explorer reachable from other machines; it has no "
                "authentication (requests are validated and bounded, and none can name a file)")
        app = create_app(args.runs, hosts=allowed_hosts(args.host, host))
        runs = app.state.explorer.runs
        listed = ", ".join(runs) if runs else "none (the classifier page needs one: hardmax train --run runs/d2 --d 2)"
        say(f"{len(runs)} trained run(s) under {args.runs}: {listed}")
        warm_up()
    except BaseException:
        sock.close()
        raise
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/playground"

    def ready() -> None:
        print(f"hardmax explore: {url}  (Ctrl-C stops it)", flush=True)
        if not args.no_browser:
            import webbrowser

            webbrowser.open(url)

    try:
        serve(app, sock, on_ready=ready)
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled: stopping is what Ctrl-C asks for here
        pass
    say("explore: stopped")
    return 0
