"""Tests of `hardmax.explain` on a hand-made d = 2 classifier whose leaders are known by hand.

Embeddings (A = I, α = 1 so γ ≈ 1/2, 3 layers, float64) and decoder logit = 3 (x − y) + 3:

    great (3, 0)   awful (0, 3)   film (1, 1)   plot (2, 0.5)   quite (1, 0)   nice (1.2, 0.5)   boring (0, 4)

Reviews, with every claim checked by hand on the scores ⟨z_i, z_j⟩ at layer 0, and for later layers
by writing a follower of leader L as z^k = L + (1 − γ)^k (z − L):

    R1 great film plot film  (label 1): great leads; film (3 vs 2, 2.5) and plot (6 vs 4.25) follow it.
                                        logit ≈ 11.3, confident and correct.
    R2 awful film film film  (label 0): awful leads, film follows. logit ≈ −5.2, confident, correct.
    R3 great awful film      (label 1): two leaders; film is tied exactly between them (3 = 3) at every
                                        layer (it stays on the diagonal). logit = 3: p ≈ 0.95, correct.
    R4 great film            (label 0): great leads; predicted positive, so wrong.
    R5 awful plot            (label 1): both lead (9 vs 1.5, 4.25 vs 1.5). logit = 0.75: p ≈ 0.68,
                                        correct but not confident at 0.9.
    R6 quite nice boring     (label 0): at layer 0 only boring leads (quite → nice: 1.2 > 1,
                                        nice → boring: 2 > 1.69). After one layer quite sits at
                                        (1.1, 0.25) and leads (1.2725 > 1.2225 > 1): an *emerged* leader.
                                        logit ≈ −3.6, confident and correct.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
import torch
from corpus import PAD, sentiment_corpus

from hardmax import HardmaxClassifier, ModelConfig
from hardmax.dynamics import Hardmax
from hardmax.explain import (
    explain_ids,
    final_layer,
    leader_masks,
    leader_statistics,
    leader_word_counts,
)

WORDS = ["<pad>", "<unk>", "great", "awful", "film", "plot", "quite", "nice", "boring"]
EMBEDDING = [(0, 0), (0, 0), (3, 0), (0, 3), (1, 1), (2, 0.5), (1, 0), (1.2, 0.5), (0, 4)]
REVIEWS = [
    (["great", "film", "plot", "film"], 1),
    (["awful", "film", "film", "film"], 0),
    (["great", "awful", "film"], 1),
    (["great", "film"], 0),
    (["awful", "plot"], 1),
    (["quite", "nice", "boring"], 0),
]
# Final-layer leaders of each review, and the layer-0 leaders where they differ.
FINAL_LEADERS = [{"great"}, {"awful"}, {"great", "awful"}, {"great"}, {"awful", "plot"}, {"quite", "boring"}]
INITIAL_LEADERS = FINAL_LEADERS[:5] + [{"boring"}]


def hand_made_model() -> HardmaxClassifier:
    model = HardmaxClassifier(ModelConfig(vocab_size=len(WORDS), d=2, layers=3, alpha_init=1.0)).double()
    with torch.no_grad():
        model.embedding.weight.copy_(torch.tensor(EMBEDDING, dtype=torch.float64))
        model.decoder.weight.copy_(torch.tensor([[3.0, -3.0]]))
        model.decoder.bias.fill_(3.0)
    return model.eval()


def encode(reviews: list[tuple[list[str], int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = max(len(words) for words, _ in reviews)
    ids = torch.full((len(reviews), n), PAD)
    for r, (words, _) in enumerate(reviews):
        ids[r, : len(words)] = torch.tensor([WORDS.index(w) for w in words])
    labels = torch.tensor([label for _, label in reviews])
    return ids, ids != PAD, labels


def leader_words(trace, mask: torch.Tensor) -> list[set[str]]:
    """Words of the leaders in `mask` (batch, m) of a trace."""
    return [{WORDS[int(i)] for i in trace.ids[b][mask[b]]} for b in range(mask.shape[0])]


@pytest.fixture
def model() -> HardmaxClassifier:
    return hand_made_model()


# --------------------------------------------------------------------------------------------
# leader_masks
# --------------------------------------------------------------------------------------------


def test_predictions_are_as_computed_by_hand(model):
    ids, mask, labels = encode(REVIEWS)
    prob = torch.sigmoid(model(ids, mask, rule=Hardmax())).detach()
    assert (prob[[0, 2]] > 0.9).all() and (prob[1] < 0.1)  # R1, R3 confident positive; R2 negative
    assert prob[3] > 0.5 and 0.5 < prob[4] < 0.9  # R4 wrong (label 0); R5 right, not confident
    assert prob[5] < 0.1


def test_leader_masks_known_leaders(model):
    ids, mask, _ = encode(REVIEWS)
    trace = model.trace(ids, mask, rule=Hardmax())
    leaders = leader_masks(trace)
    assert leaders.shape == (4, len(REVIEWS), trace.ids.shape[1]) and leaders.dtype == torch.bool
    assert leader_words(trace, leaders[0]) == INITIAL_LEADERS
    for k in range(1, 4):
        assert leader_words(trace, leaders[k]) == FINAL_LEADERS, k
    assert not (leaders & (trace.multiplicity == 0)).any()  # unused slots are never leaders


def test_leaders_do_not_move(model):
    ids, mask, _ = encode(REVIEWS)
    trace = model.trace(ids, mask, rule=Hardmax())
    leaders = leader_masks(trace)
    for k in range(3):
        still = leaders[k].unsqueeze(-1) & torch.ones_like(trace.tokens[k], dtype=torch.bool)
        assert torch.equal(trace.tokens[k + 1][still], trace.tokens[k][still])


@pytest.mark.parametrize("seed", range(3))
def test_leader_masks_match_scores(seed):
    """On random reviews, i leads iff ⟨A z_i, z_i⟩ beats ⟨A z_i, z_j⟩ for every other present j."""
    corpus = sentiment_corpus(8, n_neutral=24, min_length=6, max_length=20, seed=seed)
    torch.manual_seed(seed)
    model = HardmaxClassifier(ModelConfig(vocab_size=corpus.vocab_size, d=3, layers=5,
                                          learn_A=bool(seed % 2))).double()
    if seed % 2:
        with torch.no_grad():
            model.A_factor.add_(0.3 * torch.randn(3, 3, dtype=torch.float64))
    trace = model.trace(corpus.ids, corpus.mask, rule=Hardmax())
    got = leader_masks(trace)
    A = model.A_matrix().detach()
    for k in range(trace.tokens.shape[0]):
        for b in range(len(corpus)):
            z, present = trace.tokens[k, b].detach(), trace.multiplicity[b] > 0
            s = z @ A @ z.T
            for i in range(z.shape[0]):
                others = present.clone()
                others[i] = False
                expected = bool(present[i]) and bool((s[i, i] > s[i][others]).all())
                assert bool(got[k, b, i]) == expected, (k, b, i)


# --------------------------------------------------------------------------------------------
# leader_statistics and leader_word_counts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [512, 2])
def test_leader_statistics(model, batch_size):
    ids, mask, _ = encode(REVIEWS)
    stats = leader_statistics(model, ids, mask, batch_size=batch_size)
    counts = [len(s) for s in FINAL_LEADERS]  # 1 1 2 1 2 2
    assert stats.per_review.tolist() == counts and stats.per_review.dtype == torch.int64
    assert stats.n_reviews == 6 and stats.min == 1 and stats.max == 2
    assert stats.mean == pytest.approx(9 / 6)
    assert stats.std == pytest.approx(torch.tensor(counts, dtype=torch.float64).std().item())
    # 9 final leaders, of which "quite" in R6 emerged after layer 0.
    assert stats.fraction_initial == pytest.approx(8 / 9)


def test_leader_statistics_all_initial(model):
    ids, mask, _ = encode(REVIEWS[:5])
    stats = leader_statistics(model, ids, mask)
    assert stats.fraction_initial == 1.0 and stats.per_review.tolist() == [1, 1, 2, 1, 2]


def by_word(counter: Counter) -> Counter:
    return Counter({WORDS[i]: c for i, c in counter.items()})


@pytest.mark.parametrize("batch_size", [512, 2])
def test_leader_word_counts(model, batch_size):
    ids, mask, labels = encode(REVIEWS)
    counts = leader_word_counts(model, ids, mask, labels, confidence=0.9, batch_size=batch_size)
    # Counted: R1 (great), R3 (great, awful) as positive; R2 (awful), R6 (quite, boring; p ≈ 0.03)
    # as negative. R4 is wrong, R5 not confident.
    assert set(counts) == {"positive", "negative"}
    assert by_word(counts["positive"]) == Counter({"great": 2, "awful": 1})
    assert by_word(counts["negative"]) == Counter({"awful": 1, "quite": 1, "boring": 1})


def test_leader_word_counts_lower_confidence(model):
    ids, mask, labels = encode(REVIEWS)
    counts = leader_word_counts(model, ids, mask, labels, confidence=0.6)
    assert by_word(counts["positive"]) == Counter({"great": 2, "awful": 2, "plot": 1})  # R5 joins
    assert by_word(counts["negative"]) == Counter({"awful": 1, "quite": 1, "boring": 1})


# --------------------------------------------------------------------------------------------
# explain_ids
# --------------------------------------------------------------------------------------------


def explain(model, words: list[str]):
    return explain_ids(model, torch.tensor([WORDS.index(w) for w in words]), WORDS)


def test_explanation_followers(model):
    e = explain(model, ["great", "film", "plot", "film"])
    assert e.label == "positive" and e.probability > 0.9
    assert sorted(e.words) == ["film", "great", "plot"]
    assert dict(zip(e.words, e.multiplicity, strict=True)) == {"great": 1, "film": 2, "plot": 1}
    great = e.words.index("great")
    assert e.leaders == [great] and e.initial_leaders == [great]
    assert sorted(e.words[j] for j in e.follows[great]) == ["film", "plot"]
    assert e.trace is not None and e.trace.tokens.shape[0] == 4
    text = e.summary()
    assert "prediction: positive" in text and "1 leader(s) among 3 distinct words" in text
    assert "★ great: 2 follower(s)" in text and "film" in text and "plot" in text


def test_explanation_tie_follows_both_leaders(model):
    e = explain(model, ["great", "awful", "film"])
    great, awful, film = (e.words.index(w) for w in ("great", "awful", "film"))
    assert sorted(e.leaders) == sorted([great, awful])
    assert e.follows == {great: [film], awful: [film]}
    text = e.summary()
    assert "★ great: 1 follower(s): film" in text and "★ awful: 1 follower(s): film" in text


def test_explanation_emerged_leader(model):
    e = explain(model, ["quite", "nice", "boring"])
    quite, nice, boring = (e.words.index(w) for w in ("quite", "nice", "boring"))
    assert e.label == "negative"
    assert sorted(e.leaders) == sorted([quite, boring]) and e.initial_leaders == [boring]
    assert e.follows == {boring: [nice], quite: []}
    text = e.summary()
    assert "2 leader(s) among 3 distinct words" in text
    assert "★ boring: 1 follower(s): nice" in text
    assert "★ quite (emerged): 0 follower(s)" in text


def test_leader_word_counts_keep_only_decisive_leaders(model):
    """A leader counts when its own decoder logit |v·z + b| exceeds `decisive` (the paper's histogram);
    decisive=None counts every leader. The filter removes exactly the leaders at or below it."""
    ids, mask, labels = encode(REVIEWS)
    every = leader_word_counts(model, ids, mask, labels, confidence=0.6, decisive=None)
    with torch.no_grad():
        trace = model.trace(ids, mask, rule=Hardmax())
    logit = {}
    for b in range(ids.shape[0]):
        for i, w in enumerate(trace.ids[b].tolist()):
            if trace.multiplicity[b, i] > 0:
                logit[WORDS[w]] = abs(float(model.decoder(trace.tokens[-1, b, i]).detach().squeeze()))
    leaders = {w for side in every.values() for w in by_word(side)}
    cut = sorted(logit[w] for w in leaders)[len(leaders) // 2]  # keeps the leaders strictly above the median
    kept = leader_word_counts(model, ids, mask, labels, confidence=0.6, decisive=cut)
    for side in ("positive", "negative"):
        want = Counter({w: c for w, c in by_word(every[side]).items() if logit[w] > cut})
        assert by_word(kept[side]) == want
    assert sum(sum(c.values()) for c in kept.values()) < sum(sum(c.values()) for c in every.values())
    nothing = leader_word_counts(model, ids, mask, labels, confidence=0.6, decisive=1e9)
    assert not nothing["positive"] and not nothing["negative"]


# --------------------------------------------------------------------------------------------
# The fast path: final_layer and the leader statistics against the trace and `find_leaders`.
# --------------------------------------------------------------------------------------------


def _reference_statistics(model: HardmaxClassifier, ids: torch.Tensor, mask: torch.Tensor) -> tuple:
    """Per-review final leaders and initial∧final leaders the slow, obvious way: the classifier's full
    hardmax trace and `find_leaders` (exact identity) at layers 0 and K, review by review."""
    from hardmax.theory import find_leaders

    final, both = [], []
    for b in range(ids.shape[0]):
        trace = model.trace(ids[b:b + 1], mask[b:b + 1], rule=Hardmax())
        present = trace.multiplicity > 0
        A = None if trace.A is None else trace.A.detach()
        first = find_leaders(trace.tokens[0].detach(), A=A, mask=present, atol=0.0)
        last = find_leaders(trace.tokens[-1].detach(), A=A, mask=present, atol=0.0)
        final.append(int(last.sum()))
        both.append(int((first & last).sum()))
    return torch.tensor(final), sum(both)


@pytest.mark.parametrize("seed, learn_A, paper_padding, dtype", [(0, False, False, torch.float32),
                                                                  (1, True, False, torch.float32),
                                                                  (2, False, True, torch.float64),
                                                                  (3, False, False, torch.float64)])
def test_leader_statistics_equal_the_trace_and_find_leaders(seed, learn_A, paper_padding, dtype):
    corpus = sentiment_corpus(40, n_neutral=30, min_length=4, max_length=40, seed=seed)
    torch.manual_seed(seed)
    model = HardmaxClassifier(ModelConfig(vocab_size=corpus.vocab_size, d=4, layers=6, alpha_init=0.7,
                                          learn_A=learn_A, paper_padding=paper_padding)).to(dtype)
    with torch.no_grad():
        if learn_A:
            model.A_factor.add_(0.3 * torch.randn(4, 4, dtype=dtype))
        # Copies of one embedding: distinct words at one position, an exact tie the rule must keep.
        model.embedding.weight[5] = model.embedding.weight[6]
    per_review, both = _reference_statistics(model, corpus.ids, corpus.mask)
    stats = leader_statistics(model, corpus.ids, corpus.mask, batch_size=7)
    assert torch.equal(stats.per_review, per_review)
    assert stats.fraction_initial == pytest.approx(both / int(per_review.sum()))
    # The logits of the same pass are the classifier's hardmax logits, review by review.
    expected = torch.cat([model(corpus.ids[b:b + 1], corpus.mask[b:b + 1], rule=Hardmax()).detach()
                          for b in range(corpus.ids.shape[0])])
    torch.testing.assert_close(stats.logits, expected.float(), rtol=1e-5, atol=1e-5)


def test_evaluate_with_leaders_equals_evaluate_and_leader_statistics():
    from hardmax.explain import evaluate_with_leaders
    from hardmax.training import evaluate

    corpus = sentiment_corpus(60, n_neutral=30, min_length=4, max_length=40, seed=5)
    torch.manual_seed(5)
    model = HardmaxClassifier(ModelConfig(vocab_size=corpus.vocab_size, d=4, layers=6)).eval()
    split = corpus  # a `LabelledSplit`: ids, mask, labels
    result, stats = evaluate_with_leaders(model, split, batch_size=16)
    alone = evaluate(model, split, batch_size=16)
    for name in ("n", "accuracy_hardmax", "accuracy_softmax", "agreement"):
        assert getattr(result, name) == getattr(alone, name), name
    assert result.loss_hardmax == pytest.approx(alone.loss_hardmax, rel=1e-5)
    assert result.loss_softmax == pytest.approx(alone.loss_softmax, rel=1e-6)
    assert torch.equal(stats.per_review, leader_statistics(model, corpus.ids, corpus.mask).per_review)


def test_final_layer_is_the_traces_last_layer():
    corpus = sentiment_corpus(30, n_neutral=20, min_length=4, max_length=30, seed=4)
    torch.manual_seed(4)
    model = HardmaxClassifier(ModelConfig(vocab_size=corpus.vocab_size, d=3, layers=5)).double().eval()
    state = final_layer(model, corpus.ids, corpus.mask)
    trace = model.trace(corpus.ids, corpus.mask, rule=Hardmax())
    torch.testing.assert_close(state.logits, trace.logits.detach())
    for b in range(len(corpus)):
        ours = {int(i): z for i, z, p in zip(state.ids[b], state.last[b], state.present[b], strict=True) if p}
        theirs = {int(i): z for i, z, w in zip(trace.ids[b], trace.tokens[-1, b], trace.multiplicity[b],
                                              strict=True) if w > 0}
        assert ours.keys() == theirs.keys()
        for word, z in ours.items():
            torch.testing.assert_close(z, theirs[word].detach(), rtol=0, atol=1e-12)


def test_explanation_when_every_word_leads(model):
    """d ≥ 8 in practice: almost every word is its own leader; the summary says so and lists the decisive ones."""
    e = explain(model, ["great", "awful", "boring", "plot"])
    e = dataclasses.replace(e, leaders=list(range(len(e.words))), d=16)
    assert e.mostly_leaders
    text = e.summary(decisive=2.0)
    assert "almost every word is its own leader" in text and "d = 16" in text
    shown = [line.split(":")[0].strip("★ ") for line in text.splitlines() if line.startswith("  ★")]
    decisive = [e.words[i] for i in e.leaders if abs(e.word_logits[i]) > 2.0]
    assert sorted(shown) == sorted(decisive) and shown
    assert "follower(s)" not in text
    logits = [abs(e.word_logits[e.words.index(w)]) for w in shown]
    assert logits == sorted(logits, reverse=True)  # most decisive first
    assert "(none" in dataclasses.replace(e, word_logits=[0.0] * len(e.words)).summary()


def _same_explanation(a, b) -> None:
    for f in dataclasses.fields(a):
        if f.name != "trace":
            assert getattr(a, f.name) == getattr(b, f.name), f.name
    torch.testing.assert_close(a.trace.tokens, b.trace.tokens, rtol=0, atol=0)
    assert torch.equal(a.trace.ids, b.trace.ids) and torch.equal(a.trace.multiplicity, b.trace.multiplicity)


def test_a_batch_is_explained_as_each_review_alone(model):
    from hardmax.explain import explain_batch

    ids, mask, _ = encode(REVIEWS)
    batch = explain_batch(model, ids, mask, WORDS)
    assert len(batch) == len(REVIEWS)
    for e, (words, _) in zip(batch, REVIEWS, strict=True):
        _same_explanation(e, explain(model, words))
    assert [{e.words[i] for i in e.leaders} for e in batch] == FINAL_LEADERS


def test_an_explanation_round_trips_through_json(model):
    import json

    from hardmax.explain import Explanation

    e = explain(model, ["great", "awful", "film"])
    back = Explanation.from_dict(json.loads(json.dumps(e.to_dict())))
    _same_explanation(back, e)
    assert back.summary() == e.summary() and back.to_dict() == e.to_dict()


def test_explain_refuses_a_model_without_leaders():
    from hardmax.explain import explain_batch
    from hardmax.models import CrateBlocks, CrateClassifier, ModelConfig

    crate = CrateClassifier(ModelConfig(vocab_size=len(WORDS), d=4, layers=2, crate=CrateBlocks(heads=1)))
    ids, mask, _ = encode(REVIEWS[:1])
    with pytest.raises(ValueError, match="needs a HardmaxClassifier"):
        explain_batch(crate, ids, mask, WORDS)


def test_a_review_of_a_batch_keeps_only_its_own_positions(model):
    from hardmax.explain import explain_batch

    ids, mask, _ = encode([(["great", "film"], 1), (["awful", "film", "plot", "quite", "nice"], 0)])
    short = explain_batch(model, ids, mask, WORDS)[0]
    assert short.trace.index.shape == (1, 2) and int(short.trace.index.max()) < len(short.words)
    assert torch.equal(short.trace.index, explain(model, ["great", "film"]).trace.index)
