"""hardmax: pure-attention hardmax transformers you can run, see and measure.

Reference implementation of Alcalde, Fantuzzi, Zuazua, "Clustering in pure-attention hardmax
transformers and its role in sentiment analysis" (SIAM J. Math. Data Sci. 2025, arXiv 2407.01602).
"""

__version__ = "0.1.0"

from hardmax.dynamics import (
    Deduplicated,
    Trajectory,
    attention_step,
    attention_weights,
    deduplicate,
    default_tie_rtol,
    scores,
    simulate,
)
from hardmax.models import HardmaxClassifier, ModelConfig, ModelTrace
from hardmax.theory import (
    FIGURE2_ALPHA,
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
    polytope,
)
from hardmax.train import Evaluation, TrainConfig, TrainResult, evaluate, load_run, predict

__all__ = [
    "FIGURE2_ALPHA",
    "Clusters",
    "Polytope",
    "TheoremReport",
    "attention_sets",
    "check_theorem",
    "figure2_configurations",
    "find_clusters",
    "find_leaders",
    "leader_layers",
    "limit_set",
    "polytope",
    "Deduplicated",
    "Evaluation",
    "HardmaxClassifier",
    "ModelConfig",
    "ModelTrace",
    "TrainConfig",
    "TrainResult",
    "Trajectory",
    "__version__",
    "attention_step",
    "attention_weights",
    "deduplicate",
    "default_tie_rtol",
    "evaluate",
    "load_run",
    "predict",
    "scores",
    "simulate",
]
