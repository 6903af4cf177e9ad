"""hardmax: pure-attention hardmax transformers you can run, see and measure.

Reference implementation of Alcalde, Fantuzzi, Zuazua, "Clustering in pure-attention hardmax
transformers and its role in sentiment analysis" (SIAM J. Math. Data Sci. 2025, arXiv 2407.01602).

This file is the public API. Names are imported on first use (PEP 562 `__getattr__`), so that
`import hardmax` and `hardmax --help` do not pay for torch, numba, SciPy or matplotlib until a
name that needs them is touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hardmax.lazy import lazy_exports
from hardmax.version import __version__ as __version__

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # dynamics
    "AttentionRule": "hardmax.dynamics",
    "Deduplicated": "hardmax.dynamics",
    "Hardmax": "hardmax.dynamics",
    "Softmax": "hardmax.dynamics",
    "attention_matrix": "hardmax.dynamics",
    "attention_step": "hardmax.dynamics",
    "deduplicate": "hardmax.dynamics",
    "default_tie_rtol": "hardmax.dynamics",
    "scores": "hardmax.dynamics",
    "simulate": "hardmax.dynamics",
    # the flow: a vector field, a solver, what to save (docs/dynamics.md)
    "Localmax": "hardmax.dynamics",
    "Unnormalised": "hardmax.dynamics",
    "Field": "hardmax.dynamics",
    "Bilinear": "hardmax.dynamics",
    "QK": "hardmax.dynamics",
    "Rescaled": "hardmax.dynamics",
    "Flat": "hardmax.dynamics",
    "Sphere": "hardmax.dynamics",
    "Euler": "hardmax.dynamics",
    "RK4": "hardmax.dynamics",
    "Renormalised": "hardmax.dynamics",
    "Adaptive": "hardmax.dynamics",
    "Save": "hardmax.dynamics",
    "Solution": "hardmax.dynamics",
    "solve": "hardmax.dynamics",
    # theory
    "FIGURE2_ALPHA": "hardmax.theory",
    "Check": "hardmax.theory",
    "Clusters": "hardmax.theory",
    "Polytope": "hardmax.theory",
    "TheoremReport": "hardmax.theory",
    "attention_sets": "hardmax.theory",
    "check_theorem": "hardmax.theory",
    "figure2_configurations": "hardmax.theory",
    "paper_figure2_configurations": "hardmax.theory",
    "find_clusters": "hardmax.theory",
    "find_leaders": "hardmax.theory",
    "leader_layers": "hardmax.theory",
    "limit_set": "hardmax.theory",
    "polytope": "hardmax.theory",
    "FlowReport": "hardmax.theory",
    "check_flow": "hardmax.theory",
    "cluster_counts": "hardmax.theory",
    "energy": "hardmax.theory",
    # models
    "HardmaxClassifier": "hardmax.models",
    "ModelConfig": "hardmax.models",
    "ModelTrace": "hardmax.models",
    "CrateClassifier": "hardmax.models",
    "CrateBlocks": "hardmax.models",
    "build_model": "hardmax.models",
    # measures (coding rates: the MCR² / CRATE view)
    "MCR2Loss": "hardmax.measures",
    "class_coding_rate": "hardmax.measures",
    "coding_rate": "hardmax.measures",
    "rate_reduction": "hardmax.measures",
    "subspace_coding_rate": "hardmax.measures",
    # svm (the Att-SVM view; cvxpy loads on the first solve)
    "AttSVM": "hardmax.svm",
    "att_svm": "hardmax.svm",
    # training
    "Evaluation": "hardmax.training",
    "TrainConfig": "hardmax.training",
    "TrainResult": "hardmax.training",
    "evaluate": "hardmax.training",
    "load_run": "hardmax.training",
    "predict": "hardmax.training",
    "train": "hardmax.training",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), extra=["__version__"])
_exports_getattr = __getattr__


def __getattr__(name: str) -> object:  # noqa: F811 (the lazy exports, and the sweep package, which is callable)
    """`hardmax.sweep` is the package `hardmax.sweep`, itself the verb: ``hardmax.sweep(task, grid, out=...)``."""
    if name == "sweep":
        import importlib

        return importlib.import_module("hardmax.sweep")
    return _exports_getattr(name)


if TYPE_CHECKING:  # static checkers and IDEs see the eager imports
    from hardmax.dynamics import (  # noqa: F401
        AttentionRule,
        Deduplicated,
        Hardmax,
        Softmax,
        attention_matrix,
        attention_step,
        deduplicate,
        default_tie_rtol,
        scores,
        simulate,
    )
    from hardmax.measures import (  # noqa: F401
        MCR2Loss,
        class_coding_rate,
        coding_rate,
        rate_reduction,
        subspace_coding_rate,
    )
    from hardmax.models import (  # noqa: F401
        CrateBlocks,
        CrateClassifier,
        HardmaxClassifier,
        ModelConfig,
        ModelTrace,
        build_model,
    )
    from hardmax.svm import AttSVM, att_svm  # noqa: F401
    from hardmax.theory import (  # noqa: F401
        FIGURE2_ALPHA,
        Check,
        Clusters,
        Polytope,
        TheoremReport,
        attention_sets,
        check_theorem,
        figure2_configurations,
        find_clusters,
        find_leaders,
        leader_layers,
        limit_set,
        paper_figure2_configurations,
        polytope,
    )
    from hardmax.training import (  # noqa: F401
        Evaluation,
        TrainConfig,
        TrainResult,
        evaluate,
        load_run,
        predict,
        train,
    )
