"""Experiments that combine the library's parts into reported results.

    reproduce.py   the paper's Section 4 pipeline (train d = 2, 4, 8, 16, evaluate, explain) and its report

Each experiment is importable (a config dataclass and one function) and has a `hardmax` command.
"""
