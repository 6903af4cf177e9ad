"""Tests of `hardmax.cli.explore`: the options of `hardmax explore` and a port out of range refused in one line
before any socket is opened."""

from __future__ import annotations

from cli_cases import subparsers

from hardmax.cli import main


def test_the_defaults_listen_on_this_machine_only():
    args = subparsers()["explore"].parse_args([])
    assert (args.runs, args.port, args.host, args.no_browser) == ("runs", 8765, "127.0.0.1", False)


def test_a_port_out_of_range_is_one_line(tmp_path, capsys):
    assert main(["explore", "--runs", str(tmp_path), "--port", "70000", "--no-browser"]) == 2
    assert capsys.readouterr().err == "hardmax explore: error: --port must be in 0..65535, got 70000\n"
