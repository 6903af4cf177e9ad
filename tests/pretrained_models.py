"""Tiny random models of the supported families, built from `transformers` configs and saved with `save_pretrained`
(safetensors) into a folder, with a word-level tokenizer: the real loading path of `hardmax.pretrained.load`, offline.
Helpers of tests/test_pretrained_*.py and tests/test_cli_inspect.py."""

from __future__ import annotations

from pathlib import Path

import torch

WORDS = ("the movie was boring and a waste of time wonderful film great acting awful plot i loved it this "
         "not good bad very music story . , !").split()
TEXTS = ["the movie was boring and a waste of time .", "wonderful film , great acting !",
         "i loved it", "this plot was awful and the acting was not good , a very bad story ."]


def _tokenizer(kind: str):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] if kind != "gpt2" else ["<|endoftext|>"]
    vocab = {w: i for i, w in enumerate(special + list(WORDS))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=special[1] if kind != "gpt2" else special[0]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if kind != "gpt2":
        tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[
            ("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                       sep_token="[SEP]"), len(vocab)
    end = "<|endoftext|>"
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=end, unk_token=end), len(vocab)


def build(kind: str, folder: Path, *, seed: int = 0, positions: int = 32) -> Path:
    """Save a tiny random model of family `kind` ("bert", "gpt2", "distilbert", "roberta", "albert") with its
    tokenizer."""
    import transformers as t

    tokenizer, vocab = _tokenizer(kind)
    torch.manual_seed(seed)
    if kind == "bert":
        config = t.BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=32, max_position_embeddings=positions)
        model = t.BertModel(config)
    elif kind == "roberta":
        config = t.RobertaConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=32, max_position_embeddings=positions + 2, pad_token_id=0)
        model = t.RobertaModel(config)
    elif kind == "distilbert":
        config = t.DistilBertConfig(vocab_size=vocab, dim=16, n_layers=2, n_heads=4, hidden_dim=32,
                                    max_position_embeddings=positions)
        model = t.DistilBertModel(config)
    elif kind == "albert":  # one layer shared by every depth, embeddings narrower than the hidden width
        config = t.AlbertConfig(vocab_size=vocab, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=32, max_position_embeddings=positions)
        model = t.AlbertModel(config, add_pooling_layer=False)
    elif kind == "gpt2":
        config = t.GPT2Config(vocab_size=vocab, n_embd=16, n_layer=2, n_head=4, n_positions=positions,
                              bos_token_id=0, eos_token_id=0, layer_norm_epsilon=1e-12)
        model = t.GPT2Model(config)
    else:
        raise ValueError(kind)
    with torch.no_grad():  # biases are zero at initialisation: make them count
        for name, p in model.named_parameters():
            if name.endswith("bias") and "LayerNorm" not in name and "ln_" not in name and "layer_norm" not in name:
                p.normal_(0, 0.5)
    path = folder / kind
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path
