"""What the supported families look like inside: where the layers are, which modules compute a head's queries, keys
and values, its output projection and the MLP's activation, and each head's weights as plain matrices.

    BERT, RoBERTa, MiniLM (BERT config): encoder.layer[l].attention.self.{query,key,value}, .attention.output.dense,
        MLP activation = input of .output.dense                                      post-LN, bidirectional
    ALBERT: one shared layer (encoder.albert_layer_groups[0].albert_layers[0]) applied L times, attention.{query,
        key, value, dense}, MLP activation = input of ffn_output                   post-LN, bidirectional
    DistilBERT: transformer.layer[l].attention.{q,k,v,out}_lin, ffn.lin2            post-LN, bidirectional
    GPT-2: h[l].attn.c_attn (one Conv1D for q, k, v), attn.c_proj, mlp.c_proj; the attention's input is ln_1(h)
        pre-LN, causal

A head h's maps, in the row convention of `nn.Linear` (y = W x + b): q = W_Q^h x + b_Q^h, k, v alike with
(d_h, d) matrices, and the head's share of the output projection o = Σ_h W_O^h v̄^h + b_O with W_O^h (d, d_h).
Every family's `scaling` (1/√d_h, GPT-2's optional 1/(l+1) included) is read from its attention module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor, nn

__all__ = ["FAMILIES", "Family", "HeadWeights"]


@dataclass(frozen=True)
class HeadWeights:
    """The attention weights of one layer, split by head (float tensors on the model's device).

    Attributes:
        Wq, Wk, Wv: (H, d_h, d). bq, bk, bv: (H, d_h). Wo: (H, d, d_h), each head's columns of the output
        projection. bo: (d,), the output projection's bias (shared by the heads). scaling: the scores' factor,
        s_ij = scaling · ⟨q_i, k_j⟩ (1/√d_h).
    """

    Wq: Tensor
    bq: Tensor
    Wk: Tensor
    bk: Tensor
    Wv: Tensor
    bv: Tensor
    Wo: Tensor
    bo: Tensor
    scaling: float


def _linear(m: nn.Module) -> tuple[Tensor, Tensor]:
    """(out, in) weight and (out,) bias of an nn.Linear, or of a GPT-2 Conv1D (stored (in, out))."""
    w = m.weight.detach()
    w = w if isinstance(m, nn.Linear) else w.T
    b = m.bias.detach() if m.bias is not None else w.new_zeros(w.shape[0])
    return w, b


def _get(module: nn.Module, path: str) -> nn.Module:
    for part in path.split("."):
        module = getattr(module, part)
    return module


@dataclass(frozen=True)
class Family:
    """How to reach what the measures need in one family of models (see the module's docstring)."""

    name: str
    causal: bool
    layer_list: Callable[[nn.Module, int], list[nn.Module]]
    attention: str  # the attention module, relative to a layer: has `scaling`
    projections: tuple[str, ...]  # q, k, v modules (three), or one fused module, relative to the layer
    output: str  # the output projection, relative to the layer
    mlp_out: str  # the MLP's second projection: its input is the activation
    depth_key: str = "num_hidden_layers"
    heads_key: str = "num_attention_heads"
    width_key: str = "hidden_size"
    positions_key: str = "max_position_embeddings"

    def depth(self, config) -> int:
        """L, the number of layers."""
        return int(getattr(config, self.depth_key))

    def heads(self, config) -> int:
        """H, the heads per layer."""
        return int(getattr(config, self.heads_key))

    def width(self, config) -> int:
        """d, the width of the hidden states."""
        return int(getattr(config, self.width_key))

    def positions(self, config) -> int:
        """The most positions the model embeds."""
        return int(getattr(config, self.positions_key))

    def check_config(self, config) -> None:
        """Refuse configurations the measures cannot read (one-line ValueError)."""
        if self.width(config) % self.heads(config):
            raise ValueError(f"width {self.width(config)} is not a multiple of the {self.heads(config)} heads")
        if self.name == "albert" and (config.num_hidden_groups != 1 or config.inner_group_num != 1):
            raise ValueError("ALBERT with more than one layer group or inner layer is not supported (num_hidden_groups="
                             f"{config.num_hidden_groups}, inner_group_num={config.inner_group_num})")
        if getattr(config, "embedding_size", self.width(config)) != self.width(config) and self.name != "albert":
            raise ValueError("an embedding size different from the hidden size is not supported")
        if getattr(config, "is_decoder", False) and self.name != "gpt2":
            raise ValueError(f"{self.name} configured as a decoder is not supported")

    def layers(self, model: nn.Module) -> list[nn.Module]:
        """The L layer modules in the order they run (ALBERT: the one shared layer L times)."""
        return self.layer_list(model, self.depth(model.config))

    def modules(self, layer: nn.Module) -> tuple[nn.Module, tuple[nn.Module, ...], nn.Module, nn.Module]:
        """(attention, its q/k/v projection modules, output projection, MLP's second projection) of a layer."""
        return (_get(layer, self.attention), tuple(_get(layer, p) for p in self.projections),
                _get(layer, self.output), _get(layer, self.mlp_out))

    def split(self, outputs: list[Tensor], heads: int) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys, values (B, H, n, d_h) from the projections' outputs (B, n, H d_h each, or one fused)."""
        q, k, v = outputs if len(outputs) == 3 else outputs[0].chunk(3, dim=-1)
        b, n, hd = q.shape
        return tuple(t.view(b, n, heads, hd // heads).transpose(1, 2) for t in (q, k, v))

    def weights(self, layer: nn.Module, heads: int) -> HeadWeights:
        """`HeadWeights` of one layer."""
        attention, projections, output, _ = self.modules(layer)
        if len(projections) == 3:
            (Wq, bq), (Wk, bk), (Wv, bv) = (_linear(m) for m in projections)
        else:
            W, b = _linear(projections[0])
            (Wq, Wk, Wv), (bq, bk, bv) = W.chunk(3, 0), b.chunk(3, 0)
        Wo, bo = _linear(output)
        d = Wo.shape[0]
        dh = d // heads
        return HeadWeights(Wq=Wq.reshape(heads, dh, -1), bq=bq.reshape(heads, dh), Wk=Wk.reshape(heads, dh, -1),
                           bk=bk.reshape(heads, dh), Wv=Wv.reshape(heads, dh, -1), bv=bv.reshape(heads, dh),
                           Wo=Wo.reshape(d, heads, dh).permute(1, 0, 2), bo=bo, scaling=float(attention.scaling))


def _bert_layers(model, depth):
    return list(model.encoder.layer)


def _albert_layers(model, depth):
    return [model.encoder.albert_layer_groups[0].albert_layers[0]] * depth


def _distilbert_layers(model, depth):
    return list(model.transformer.layer)


def _gpt2_layers(model, depth):
    return list(model.h)


_BERT = dict(causal=False, layer_list=_bert_layers, attention="attention.self",
             projections=("attention.self.query", "attention.self.key", "attention.self.value"),
             output="attention.output.dense", mlp_out="output.dense")

#: model_type -> `Family`: what `hardmax.pretrained.loader` accepts.
FAMILIES: dict[str, Family] = {
    "bert": Family(name="bert", **_BERT),
    "roberta": Family(name="roberta", **_BERT),
    "albert": Family(name="albert", causal=False, layer_list=_albert_layers, attention="attention",
                     projections=("attention.query", "attention.key", "attention.value"),
                     output="attention.dense", mlp_out="ffn_output"),
    "distilbert": Family(name="distilbert", causal=False, layer_list=_distilbert_layers, attention="attention",
                         projections=("attention.q_lin", "attention.k_lin", "attention.v_lin"),
                         output="attention.out_lin", mlp_out="ffn.lin2", depth_key="n_layers",
                         heads_key="n_heads", width_key="dim"),
    "gpt2": Family(name="gpt2", causal=True, layer_list=_gpt2_layers, attention="attn", projections=("attn.c_attn",),
                   output="attn.c_proj", mlp_out="mlp.c_proj", depth_key="n_layer", heads_key="n_head",
                   width_key="n_embd", positions_key="n_positions"),
}
