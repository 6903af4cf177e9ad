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
                   help="address to bind (default: 127.0.0.1, this machine only; anything else is reachable "
                        "from the network: a warning is printed)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")


def run_explore(args: argparse.Namespace) -> int:
    """Run `hardmax explore` with the parsed `args`; returns the exit code."""
    from hardmax.explore.server import quiet_openmp

    quiet_openmp()  # before anything imports torch
    from hardmax.cli.output import say
    from hardmax.explore.server import create_app, open_socket, serve, warm_up

    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0..65535, got {args.port}")
    if args.host not in ("127.0.0.1", "localhost", "::1"):  # (the app then answers any Host header)
        say(f"warning: --host {args.host} makes the explorer reachable from other machines; it has no "
            "authentication (requests are validated and bounded, and none can name a file)")
    from hardmax.explore.server import LOCAL_HOSTS

    local = args.host in ("127.0.0.1", "localhost", "::1")
    app = create_app(args.runs, hosts=LOCAL_HOSTS if local else ("*",))
    runs = app.state.explorer.runs
    listed = ", ".join(runs) if runs else "none (the classifier page needs one: hardmax train --run runs/d2 --d 2)"
    say(f"{len(runs)} trained run(s) under {args.runs}: {listed}")
    warm_up()
    sock = open_socket(args.host, args.port)
    host, port = sock.getsockname()[:2]
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
