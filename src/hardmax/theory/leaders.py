"""Attention sets, leaders, leader layers and clusters, computed with the engine's own tie rule.

Snapshots (`attention_sets`, `find_leaders`) take tokens of shape (..., n, d); trajectory functions
(`leader_layers`, `find_clusters`) take a `dynamics.Solution`. All are batched torch code; the
geometry of K and S is in `theory.geometry`, the theorem check in `theory.check`.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import weakref
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hardmax._numba import numba
from hardmax.dynamics import Bilinear, Hardmax, Solution, attention_matrix, deduplicate, validate_A

# engine services (hardmax.dynamics._engines.SERVICES): the compiled snapshots and the tie rule's sets
from hardmax.dynamics._engines.kernel import hardmax_snapshots
from hardmax.dynamics._engines.select import hardmax_sets, score_bias
from hardmax.theory.geometry import components
from hardmax.theory.inputs import as_tokens, check_atol, check_trajectory

__all__ = ["Clusters", "HardmaxPath", "ScaledPath", "attention_sets", "default_atol", "find_clusters", "find_leaders",
           "hardmax_path", "leader_history", "leader_layers", "scaled_path", "stable_from", "trajectory_rtol",
           "unit_scaled"]

CHUNK_ENTRIES = 1 << 19  # attention entries (sequences × m × m) processed at once
# Trajectories whose largest coordinate (or A's largest entry) lies beyond 2^±SAFE_EXPONENT are analysed
# scaled to order 1 (`unit_scaled`), as `simulate` runs them.
SAFE_EXPONENT = 20


# --------------------------------------------------------------------------------------------
# Snapshots: attention sets and leaders of one configuration.
# --------------------------------------------------------------------------------------------


def _flatten(tokens, mask) -> tuple[Tensor, Tensor, tuple[int, ...]]:
    """Tokens (..., n, d) -> (B, n, d) floating tensor, mask -> (B, n) bool, and the leading shape."""
    z = as_tokens(tokens)  # real, finite, non-empty: what simulate accepts
    lead, (n, d) = tuple(z.shape[:-2]), z.shape[-2:]
    zb = z.reshape(-1, n, d)
    if mask is None:
        real = torch.ones(zb.shape[:2], dtype=torch.bool, device=z.device)
    else:
        m = mask if isinstance(mask, Tensor) else torch.as_tensor(np.asarray(mask))
        if m.dtype != torch.bool or tuple(m.shape) != (*lead, n):
            raise ValueError(f"mask must be a bool array of shape {(*lead, n)}, got {m.dtype} {tuple(m.shape)}")
        real = m.reshape(-1, n).to(z.device)
    return zb, real, lead


def _score_matrix(A, d: int, dtype: torch.dtype, device) -> Tensor | None:
    """A as the engine uses it: None for the identity (so scores are computed exactly as in `simulate`)."""
    A_t = validate_A(A, d, dtype, device)
    return None if torch.equal(A_t, torch.eye(d, dtype=dtype, device=device)) else A_t


def _scale(z: Tensor, real: Tensor) -> Tensor:
    """(B,) R = max ‖z_i‖ over real tokens, at least the smallest normal number."""
    norms = torch.where(real, z.norm(dim=-1), torch.zeros((), dtype=z.dtype, device=z.device))
    return norms.amax(dim=-1).clamp(min=torch.finfo(z.dtype).tiny)


def default_atol(z: Tensor, real: Tensor, atol: float | None, A: Tensor | None, tie_rtol: float) -> Tensor:
    """(B,) same-point tolerance: `atol` if given, else sqrt(2 tie_rtol cond(A)) · R per sequence.

    This is the engine's resolution: two leaders v, u have score margins ⟨A v, v − u⟩ and ⟨A u, u − v⟩
    summing to ‖v − u‖_A² ≥ λ_min ‖v − u‖², against a tie tolerance of at most tie_rtol λ_max R². Closer
    than this, the tie rule may merge them (float64: 1.7e-7 R for A = I; float32: 3.9e-3 R).
    """
    if check_atol(atol) is not None:
        return torch.full(z.shape[:1], float(atol), dtype=z.dtype, device=z.device)
    cond = 1.0
    if A is not None:
        eig = torch.linalg.eigvalsh(A.detach().to(torch.float64).cpu())
        cond = float(eig[-1] / eig[0])
    return math.sqrt(2 * tie_rtol * cond) * _scale(z, real)


def _pairs(dd, values: Tensor) -> Tensor:
    """Map (B, m, m) values between distinct tokens to (B, n, n) values between original tokens."""
    n = dd.index.shape[1]
    rows = dd.expand(values)  # (B, n, m)
    return torch.gather(rows, 2, dd.index.unsqueeze(1).expand(-1, n, -1))


def _moderate(z: Tensor, real: Tensor) -> bool:
    """Whether the largest real coordinate p has tiny^¼ ≤ p ≤ max^¼: products of four coordinates stay normal."""
    info = torch.finfo(z.dtype)
    peak = float(torch.where(real.unsqueeze(-1), z.detach().abs(), 0).amax()) if z.numel() else 0.0
    return info.tiny ** 0.25 <= peak <= info.max ** 0.25


def _snapshot(z: Tensor, real: Tensor, A: Tensor | None, tie_rtol: float, same: Tensor):
    """Leaders (B, n) bool and attention targets mean_{j∈C_i} z_j (B, n, d) of configurations z (B, n, d).

    Float32 and float64 tokens on the CPU whose products stay in the normal range go to the compiled kernel
    (`dynamics.kernel.hardmax_snapshots`, the same rule, configurations in parallel); tokens on another device
    (CUDA) or of another dtype, and tokens whose products leave the normal range (where the two round
    differently), to the torch tie rule (`_snapshot_torch`). The tests hold the two to each other.
    """
    if z.device.type == "cpu" and z.dtype in (torch.float32, torch.float64) and _moderate(z, real):
        leader, target = hardmax_snapshots(
            z.detach().contiguous().numpy(), real.cpu().numpy(),
            None if A is None else A.detach().cpu().to(z.dtype).numpy(), tie_rtol,
            same.detach().cpu().to(z.dtype).numpy(), torch.get_num_threads())
        return torch.from_numpy(leader) & real, torch.from_numpy(target)
    return _snapshot_torch(z, real, A, tie_rtol, same)


def _snapshot_torch(z: Tensor, real: Tensor, A: Tensor | None, tie_rtol: float, same: Tensor):
    """`_snapshot` by the torch tie rule (`hardmax_sets`), batched, on any device and at any scale."""
    dd = deduplicate(z, real)
    # Sequences with few distinct tokens (converged layers) go together, so the m × m work stays small.
    counts = dd.index.amax(dim=1) + 1
    order = torch.argsort(counts, stable=True)
    leader = torch.empty(z.shape[:2], dtype=torch.bool, device=z.device)
    target = torch.empty_like(z)
    step = max(1, CHUNK_ENTRIES // max(1, z.shape[1] ** 2))
    for rows in torch.split(order, step):
        m = int(counts[rows].max())
        u, w = dd.tokens[rows, :m], dd.multiplicity[rows, :m]
        ties = hardmax_sets(u, w, A, tie_rtol)  # (b, m, m) C_i, the engine's tie rule
        p = ties * w.unsqueeze(-2)  # weights of the members; P = p / Σ_j p_ij
        b, i, j = ties.nonzero(as_tuple=True)
        # Attention sets are tiny (usually one token), so measure only the pairs that are tied.
        gap = (u[b, j] - u[b, i]).norm(dim=-1)
        spread = torch.zeros(len(rows) * m, dtype=z.dtype, device=z.device)
        spread = spread.scatter_reduce(0, b * m + i, gap, reduce="amax").view(-1, m)
        lead = ties.any(-1) & (spread <= same[rows].unsqueeze(-1))
        index = dd.index[rows]
        leader[rows] = torch.gather(lead, 1, index) & real[rows]
        mean = (p @ u) / p.sum(-1, keepdim=True).clamp(min=torch.finfo(u.dtype).tiny)
        target[rows] = torch.gather(mean, 1, index.unsqueeze(-1).expand(-1, -1, z.shape[2]))
    return leader, target


def attention_sets(tokens, *, A=None, mask=None, tie_rtol: float | None = None) -> Tensor:
    """Hardmax attention sets C_i = argmax_j ⟨A z_i, z_j⟩, with the engine's tie rule.

    Args:
        tokens: (..., n, d) tokens, e.g. (n, d) or (batch, n, d); NumPy array or tensor.
        A: (d, d) symmetric positive definite, None for the identity.
        mask: (..., n) bool, True for real tokens; masked tokens neither attend nor are attended to.
        tie_rtol: tie tolerance of rule (★), as in `Hardmax(tie_rtol)` (None: the dtype's default).

    Returns:
        (..., n, n) bool, entry [i, j] True when j ∈ C_i. Identical tokens are in or out together; rows of
        masked tokens are all False.
    """
    z, real, lead = _flatten(tokens, mask)
    n, d = z.shape[-2:]
    A_used = _score_matrix(A, d, z.dtype, z.device)
    rtol = Hardmax(tie_rtol).rtol(z.dtype)
    dd = deduplicate(z, real)
    ties = attention_matrix(dd.tokens, dd.multiplicity, rule=Hardmax(rtol), A=A_used) > 0
    return _pairs(dd, ties).reshape(*lead, n, n)


# Score margins farther than this many tie tolerances from 0 decide a leader without the tie rule: the
# engine's attention sets only ever hold keys within 2 (tie_rtol + d·eps) W R of a row's best score
# (`hardmax.dynamics._engines.ties.coarse_tolerance`; W = max_j ‖|A||z_j|‖, R = max_j ‖z_j‖), and the scores computed
# here round differently from the engine's by less than d·eps·W·R.
_SAFETY = 4.0
_SCREEN_CHUNK = 64  # sequences scored together by the screen (their (chunk, n, n) scores stay in cache)


def _screened_leaders(z: Tensor, real: Tensor, A: Tensor | None, rtol: float) -> Tensor:
    """`_snapshot`'s leaders with exact identity (atol = 0), faster: a token whose own score beats every other
    one by more than any tie tolerance of the engine, s_ii − max_{j≠i} s_ij > 8 (tie_rtol + d·eps) W R, is a
    leader, one beaten by as much is not, and only the sequences with a token in between (near-ties, copies
    of one position) go through the tie rule. z (B, n, d), real (B, n) -> (B, n) bool."""
    leader = torch.zeros_like(real)
    unsure = torch.zeros(real.shape[0], dtype=torch.bool, device=real.device)
    if z.shape[1] == 0:
        return leader
    tol = _SAFETY * 2 * (rtol + z.shape[-1] * torch.finfo(z.dtype).eps)
    zero = torch.zeros((), dtype=z.dtype, device=z.device)
    for rows in torch.split(torch.arange(z.shape[0], device=z.device), _SCREEN_CHUNK):
        u, present = z[rows], real[rows]
        # The keys' transpose made contiguous first (PyTorch's CPU bmm is 2x slower on a transposed view at
        # these sizes), absent keys then set to −inf by an additive bias (faster than a broadcast masked_fill_).
        s = torch.bmm(u if A is None else u @ A, u.transpose(-1, -2).contiguous())  # (chunk, n, n)
        s += score_bias(present, u.dtype)
        diagonal = s.diagonal(dim1=1, dim2=2)
        own = diagonal.clone()
        diagonal.fill_(-math.inf)
        margin = own - s.amax(-1)  # +inf for a sequence's only token
        radius = torch.where(present, u.norm(dim=-1), zero).amax(-1, keepdim=True)  # R
        size = u.abs() if A is None else u.abs() @ A.abs()
        size = torch.where(present, size.norm(dim=-1), zero).amax(-1, keepdim=True)  # W
        bound = tol * size * radius
        leader[rows] = (margin > bound) & present
        unsure[rows] = ((margin.abs() <= bound) & present).any(-1)
    if bool(unsure.any()):
        rows = unsure.nonzero().squeeze(-1)
        zero_atol = torch.zeros(len(rows), dtype=z.dtype, device=z.device)
        leader[rows], _ = _snapshot(z[rows], real[rows], A, rtol, zero_atol)
    return leader


def find_leaders(tokens, *, A=None, mask=None, tie_rtol: float | None = None,
                 atol: float | None = None) -> Tensor:
    """Leaders of one configuration: tokens whose attention set contains only (copies of) themselves.

        i is a leader  ⇔  C_i ⊆ { j : ‖z_j − z_i‖ ≤ atol }

    Args:
        tokens, A, mask, tie_rtol: as in `attention_sets`.
        atol: distance under which tokens count as identical; default sqrt(2 tie_rtol cond(A))·max_i ‖z_i‖
            per sequence, the distance below which the tie rule may merge two leaders; 0 gives exact
            identity. A follower that has converged onto its leader is, in one snapshot, a copy of it;
            `leader_layers` uses the history to tell the two apart.

    Returns:
        (..., n) bool.

    Example:

    >>> import torch, hardmax
    >>> hardmax.find_leaders(torch.tensor([[2., 0], [0, 2], [0.5, 0.5]], dtype=torch.float64)).tolist()
    [True, True, False]
    """
    z, real, lead = _flatten(tokens, mask)
    A_used = _score_matrix(A, z.shape[-1], z.dtype, z.device)
    rtol = Hardmax(tie_rtol).rtol(z.dtype)
    if atol is not None and check_atol(atol) == 0:  # exact identity: most leaders decided by their margin alone
        leader = _screened_leaders(z, real, None if A_used is None else A_used.detach(), rtol)
    else:
        leader, _ = _snapshot(z, real, A_used, rtol, default_atol(z, real, atol, A_used, rtol))
    return leader.reshape(*lead, z.shape[1])


# --------------------------------------------------------------------------------------------
# Trajectories: leader history, leader layers, clusters.
# --------------------------------------------------------------------------------------------


def trajectory_rtol(trajectory: Solution) -> float:
    """The tie tolerance a hardmax trajectory was computed with."""
    check_trajectory(trajectory)
    if not isinstance(trajectory.rule, Hardmax):
        raise ValueError(f"this needs a hardmax trajectory (Theorem 2.1 is about hardmax attention), "
                         f"got one computed with {trajectory.rule}")
    return trajectory.rule.rtol(trajectory.tokens.dtype)


@dataclass(frozen=True)
class HardmaxPath:
    """A hardmax trajectory's positions with a batch axis: path (L, B, n, d), real (B, n) bool, and whether the
    trajectory was unbatched (single)."""

    path: Tensor
    real: Tensor
    single: bool


def hardmax_path(trajectory: Solution) -> HardmaxPath:
    """The positions of every layer with a batch axis (see `HardmaxPath`).

    Raises ValueError unless the trajectory is hardmax and stores every layer.
    """
    trajectory_rtol(trajectory)
    if not trajectory.complete:
        raise ValueError("this needs every layer of the trajectory; simulate with save=Save() (every layer)")
    t = trajectory.tokens
    single = t.dim() == 3
    path = t.unsqueeze(1) if single else t
    return HardmaxPath(path=path, real=trajectory.mask.reshape(path.shape[1], path.shape[2]), single=single)


def unit_scaled(trajectory: Solution) -> tuple[Solution, torch.Tensor | None, int]:
    """The trajectory with each sequence's real tokens scaled by an exact power of two 2^-e_b to a largest
    coordinate of order 1, and A by 4^-k likewise; (trajectory, e (B,) or None when nothing is scaled, 2k).

    Hardmax is scale-free (C_i depends on neither scale), and every check is a distance compared with a
    tolerance proportional to the tokens' scale, or a ratio: so the checks are the same at every scale,
    computed where squares of coordinates neither overflow (1e160) nor underflow (1e-160).
    """
    tokens = trajectory.tokens.detach()
    single = tokens.dim() == 3
    path = tokens.unsqueeze(1) if single else tokens  # (L, B, n, d)
    real = trajectory.mask.reshape(path.shape[1], path.shape[2])
    peak = path.abs().amax(dim=(0, 3)).masked_fill(~real, 0).amax(dim=1).to(torch.float64)  # (B,)
    _, e = torch.frexp(peak)
    e = torch.where(peak > 0, e, torch.zeros_like(e)).to(torch.int64)
    _, a_exponent = torch.frexp(trajectory.A.detach().abs().amax().to(torch.float64))
    a_exponent = 2 * (int(a_exponent) // 2)  # even: ‖z‖_A scales by an exact power of two
    if (e.numel() == 0 or int(e.abs().max()) <= SAFE_EXPONENT) and abs(a_exponent) <= SAFE_EXPONENT:
        return trajectory, None, 0
    scale = torch.ldexp(torch.ones_like(peak), -e).to(path.dtype).view(1, -1, 1, 1)
    scaled = torch.where(real[None, :, :, None], path * scale, path)
    scaled = scaled[:, 0] if single else scaled
    A = torch.ldexp(trajectory.A.detach().to(torch.float64), torch.tensor(-a_exponent)).to(trajectory.A.dtype)
    field = dataclasses.replace(trajectory.field, scores=Bilinear(A))
    return dataclasses.replace(trajectory, tokens=scaled, field=field), e, a_exponent


@dataclass(frozen=True)
class ScaledPath:
    """What the trajectory functions compute on, in units of order 1 (`scaled_path`).

    Attributes:
        trajectory: the trajectory scaled by `unit_scaled`. path (L, B, n, d), real (B, n), single: its
            `hardmax_path`. same: (B,) same-point tolerance in these units. exponents: (B,) e with the tokens
            scaled by 2^-e, or None when nothing was scaled. a_exponent: A scaled by 2^-a_exponent (even).
    """

    trajectory: Solution
    path: Tensor
    real: Tensor
    single: bool
    same: Tensor
    exponents: Tensor | None
    a_exponent: int


def scaled_path(trajectory: Solution, atol: float | None) -> ScaledPath:
    """`unit_scaled`, its `hardmax_path`, and the same-point tolerance `atol` (None: `default_atol`) in its units.

    Raises ValueError unless the trajectory is hardmax and stores every layer.
    """
    hardmax_path(trajectory)  # refuses anything but a hardmax Solution that stores every layer
    trajectory, exponents, a_exponent = unit_scaled(trajectory)
    walk = hardmax_path(trajectory)
    same = default_atol(walk.path[0], walk.real, atol, trajectory.A, trajectory_rtol(trajectory))
    if atol is not None and exponents is not None:  # the caller's atol, in the units the functions run in
        same = torch.ldexp(same.to(torch.float64), -exponents).to(same.dtype)
    return ScaledPath(trajectory=trajectory, path=walk.path, real=walk.real, single=walk.single, same=same,
                      exponents=exponents, a_exponent=a_exponent)


# The last `leader_history` computed, reused for the same trajectory object with the same contents:
# `check_theorem`, `find_clusters` and `leader_layers` of one trajectory (what a picture or the explorer asks
# for together) then share one pass. Keyed by identity, and checked against a copy of the bits of the tokens, A,
# the mask and the tolerance kept with it (a write through any alias, NumPy's included, changes them; comparing
# 2.4 MB of bits costs ~0.1 ms, a SHA-256 digest of them 1.3 ms), on the CPU only (elsewhere the copy would cross
# devices).
_LAST_HISTORY: dict = {}
_HISTORY_LOCK = threading.Lock()


def _history_bits(trajectory: Solution, same: Tensor) -> tuple | None:
    """(dtype, shape, bits) of the tokens, A, the mask and `same` (bits: the memory as unsigned integers of the
    item's size, so that equality is bitwise: NaN equals itself, −0.0 differs from 0.0); None off the CPU."""
    tensors = (trajectory.tokens, trajectory.A, trajectory.mask, same)
    if any(t.device.type != "cpu" for t in tensors):
        return None
    out = []
    for t in tensors:
        a = np.ascontiguousarray(t.detach().numpy())
        out.append((t.dtype, tuple(t.shape), a.reshape(-1).view(f"u{a.itemsize}")))
    return tuple(out)


def _same_bits(kept: tuple, now: tuple) -> bool:
    return all(k[0] == n[0] and k[1] == n[1] and np.array_equal(k[2], n[2]) for k, n in zip(kept, now, strict=True))


def leader_history(trajectory: Solution, same: Tensor) -> tuple[Tensor, Tensor]:
    """Leaders (L, B, n) bool and attention targets (L, B, n, d) at every layer (callers must not modify them).

    A token is a leader at layer k when it is a snapshot leader and, unless it already led at layer k−1,
    it does not sit within `same` of a token that led at layer k−1: a follower that converges onto a
    leader becomes numerically a copy of it, but in exact arithmetic it never reaches it.
    """
    bits = _history_bits(trajectory, same)
    if bits is None:
        return _leader_history(trajectory, same)
    with _HISTORY_LOCK:
        hit = _LAST_HISTORY.get("entry")
    if hit is not None and hit[0]() is trajectory and _same_bits(hit[1], bits):
        return hit[2]
    # the bits as they are before the computation: a write during it (another thread) then misses, never hits
    kept = tuple((dtype, shape, values.copy()) for dtype, shape, values in bits)
    result = _leader_history(trajectory, same)
    with _HISTORY_LOCK:
        _LAST_HISTORY["entry"] = (weakref.ref(trajectory), kept, result)
    return result


def _leader_history(trajectory: Solution, same: Tensor) -> tuple[Tensor, Tensor]:
    walk = hardmax_path(trajectory)
    path, real = walk.path, walk.real
    L, B, n, d = path.shape
    A_used = _score_matrix(trajectory.A, d, path.dtype, path.device)
    # Converged sequences stop moving (to the last bit) long before the last layer: evaluate only the
    # (layer, sequence) pairs whose tokens changed, and carry the others forward.
    moved = torch.ones(L, B, dtype=torch.bool, device=path.device)
    moved[1:] = (path[1:] != path[:-1]).flatten(2).any(-1)
    todo = moved.flatten().nonzero(as_tuple=True)[0]
    flat = path.reshape(L * B, n, d)
    real_f, same_f = real.repeat(L, 1), same.repeat(L)
    rtol = trajectory_rtol(trajectory)
    if len(todo) == L * B:  # every layer moved (a slow run): nothing to gather or carry
        snap, targets = _snapshot(flat, real_f, A_used, rtol, same_f)
        snap, targets = snap.view(L, B, n), targets.view(L, B, n, d)
    else:
        snap = torch.zeros(L * B, n, dtype=torch.bool, device=path.device)
        targets = torch.empty_like(flat)
        snap[todo], targets[todo] = _snapshot(flat[todo], real_f[todo], A_used, rtol, same_f[todo])
        # Layers where nothing moved carry the last computed layer's snapshot forward.
        last = torch.where(moved, torch.arange(L, device=path.device).view(L, 1), 0).cummax(dim=0).values  # (L, B)
        snap = snap.view(L, B, n).gather(0, last.unsqueeze(-1).expand(L, B, n))
        targets = targets.view(L, B, n, d).gather(0, last.view(L, B, 1, 1).expand(L, B, n, d))
    return _leaders_in_time(snap, path, same), targets


def _leaders_in_time(snap: Tensor, path: Tensor, same: Tensor) -> Tensor:
    """(L, B, n) leaders from snapshot leaders snap (L, B, n), positions path (L, B, n, d) and same (B,):
    leaders[0] = snap[0], leaders[k] = snap[k] & (leaders[k−1] | no token of leaders[k−1] within same).

    Float32 and float64 positions on the CPU go to the compiled recurrence (`_recurrence`), positions on another
    device (CUDA) or of another dtype to `_leaders_in_time_torch`; the tests hold the two to each other.
    """
    if path.device.type == "cpu" and path.dtype in (torch.float32, torch.float64):
        out = np.empty(tuple(snap.shape), dtype=np.bool_)
        _recurrence(np.ascontiguousarray(snap.numpy()), np.ascontiguousarray(path.detach().numpy()),
                    same.detach().cpu().to(path.dtype).numpy(), out)
        return torch.from_numpy(out)
    return _leaders_in_time_torch(snap, path, same)


@numba.njit(cache=True, error_model="numpy")
def _recurrence(snap, path, same, out):
    """`_leaders_in_time` layer by layer, sequence by sequence, into out (L, B, n): a snapshot leader that did
    not lead at k − 1 (a follower that has become a copy of its leader) is measured against the leaders of
    k − 1, the one it was last found near first; ‖z_i − z_l‖ summed over the coordinates in order, as the
    torch norm of a short vector."""
    L, B, n = snap.shape
    d = path.shape[3]
    held = np.empty(n, np.int64)
    last = np.empty(n, np.int64)
    for b in range(B):
        radius = same[b]
        for i in range(n):
            out[0, b, i] = snap[0, b, i]
            last[i] = -1
        for k in range(1, L):
            h = 0
            for i in range(n):
                if out[k - 1, b, i]:
                    held[h] = i
                    h += 1
            for i in range(n):
                if not snap[k, b, i] or out[k - 1, b, i]:
                    out[k, b, i] = snap[k, b, i]
                    continue
                near = False
                for p in range(-1, h):
                    l = last[i] if p < 0 else held[p]
                    if l < 0 or not out[k - 1, b, l]:
                        continue
                    gap = path[k, b, i, 0] * 0
                    for c in range(d):
                        gap += (path[k, b, i, c] - path[k, b, l, c]) * (path[k, b, i, c] - path[k, b, l, c])
                    if np.sqrt(gap) <= radius:
                        near = True
                        last[i] = l
                        break
                out[k, b, i] = not near


def _leaders_in_time_torch(snap: Tensor, path: Tensor, same: Tensor) -> Tensor:
    """`_leaders_in_time` by batched torch operations: what runs off the CPU (CUDA) and for other dtypes.

    The recurrence changes at few layers (a leader is lost or emerges), so it is evaluated for a window of
    layers at once as if leaders[k−1] stayed what it is, up to the first layer where that assumption fails; the
    window doubles while it holds. Distances are to the leaders only (a few per sequence), never all pairs, and
    the layers after the last change of its inputs are copied once the recurrence repeats itself.
    """
    L, B, n, d = path.shape
    leaders = torch.empty_like(snap)
    leaders[0] = snap[0]
    # After the last layer whose positions or snapshot changed, the inputs repeat: once leaders[k−1] equals
    # leaders[k−2] there, every later layer repeats it too (a converged run's tail is not evaluated).
    varied = torch.zeros(L, dtype=torch.bool, device=snap.device)
    varied[1:] = (path[1:] != path[:-1]).flatten(1).any(1) | (snap[1:] != snap[:-1]).flatten(1).any(1)
    last = int(varied.nonzero().max()) if bool(varied.any()) else 0
    k, window = 1, 8
    while k < L:
        if k >= last + 2 and bool(torch.equal(leaders[k - 1], leaders[k - 2])):
            leaders[k:] = leaders[k - 1]
            break
        held = leaders[k - 1]  # (B, n)
        end = min(L, k + window)
        width = max(1, int(held.sum(1).max()))
        places = torch.sort(held.to(torch.uint8), dim=1, descending=True, stable=True).indices[:, :width]  # (B, w)
        real = held.gather(1, places)
        ahead = path[k:end]  # (W, B, n, d)
        at = ahead.gather(2, places.view(1, B, width, 1).expand(end - k, B, width, d))  # the leaders' positions
        near = (((ahead.unsqueeze(3) - at.unsqueeze(2)).norm(dim=-1) <= same.view(1, B, 1, 1))
                & real.view(1, B, 1, width)).any(-1)  # (W, B, n)
        then = snap[k:end] & (held.unsqueeze(0) | ~near)
        changed = (then != held.unsqueeze(0)).flatten(1).any(1)  # (W,)
        if not bool(changed.any()):
            leaders[k:end] = then
            # Doubling while it holds, within CHUNK_ENTRIES distances (window × B × n × leaders) at a time.
            k, window = end, max(1, min(2 * window, CHUNK_ENTRIES // max(1, B * n * width)))
            continue
        j = int(changed.nonzero()[0])
        leaders[k:k + j + 1] = then[:j + 1]
        k = k + j + 1
    return leaders


def stable_from(flags: Tensor) -> Tensor:
    """First layer k with flags[k:] all True, -1 when flags[-1] is False. flags: (L, ...) bool."""
    L = flags.shape[0]
    trailing = torch.cumprod(flags.flip(0).to(torch.int64), dim=0).sum(0)
    return torch.where(trailing > 0, L - trailing, torch.full_like(trailing, -1))


def leader_layers(trajectory: Solution, *, atol: float | None = None) -> Tensor:
    """First layer from which each token is a leader at every layer up to the last.

    Args:
        trajectory: hardmax `Solution` from `simulate`.
        atol: same-point distance (see `find_leaders`), default from the initial tokens.

    Returns:
        (..., n) int64: k such that the token leads at layers k..K, or -1 when it does not lead at layer K
        (followers, and masked tokens). Followers that converge onto a leader do not inherit its
        leadership (see `leader_history`); tokens identical from the start lead together.

    Paper: Theorem 2.1 (leaders settle in finitely many layers; a token can become a leader later).
    """
    scaled = scaled_path(trajectory, atol)
    leaders, _ = leader_history(scaled.trajectory, scaled.same)
    layers = stable_from(leaders)
    return layers[0] if scaled.single else layers


@dataclass(frozen=True)
class Clusters:
    """Tokens grouped by final position (`find_clusters`).

    Attributes:
        labels: (..., n) int64 cluster of each token, numbered by first appearance; -1 for masked tokens.
        centers: (c, d) mean final position of each cluster (a list of such tensors for a batch).
        leader: (..., n) int64 index of a token that leads at the last layer and sits in the token's
            cluster (the smallest such index), or -1 when the cluster has no leader — a limit in S that is
            not a vertex of K, such as the projection of the origin onto an edge.
    """

    labels: Tensor
    centers: Tensor | list[Tensor]
    leader: Tensor


def find_clusters(trajectory: Solution, *, atol: float | None = None) -> Clusters:
    """Group tokens whose final positions coincide up to the unfinished convergence.

    Two tokens share a cluster when a chain of tokens links them with steps of at most
    atol + 2 max_i ρ_i, where ρ_i = ‖z_i^K − z_i^{K−1}‖ / α_K estimates the distance of token i to its
    limit: once a token follows a fixed target x*, z^K − x* = (z^{K−1} − x*)/(1+α), so
    ‖z^K − x*‖ = ‖z^K − z^{K−1}‖/α exactly.

    Args:
        trajectory: hardmax `Solution`. atol: same-point distance (see `find_leaders`).

    Returns:
        `Clusters`.
    """
    scaled = scaled_path(trajectory, atol)
    trajectory, path, real, single, same, exponents = (scaled.trajectory, scaled.path, scaled.real, scaled.single,
                                                       scaled.same, scaled.exponents)
    leaders, _ = leader_history(trajectory, same)
    final_leader = leaders[-1].cpu().numpy()
    final = path[-1].detach().cpu().to(torch.float64).numpy()
    if trajectory.layers > 0:
        step = (path[-1] - path[-2]).norm(dim=-1).cpu().to(torch.float64).numpy()
        residual = step / float(trajectory.alpha[-1])
    else:
        residual = np.zeros(final.shape[:2])
    real_np = real.cpu().numpy()
    labels = np.full(real_np.shape, -1, dtype=np.int64)
    owner = np.full(real_np.shape, -1, dtype=np.int64)
    centers = []
    for b in range(final.shape[0]):
        idx = np.nonzero(real_np[b])[0]
        radius = float(same[b]) + 2.0 * float(residual[b, idx].max(initial=0.0))
        lab = components(final[b, idx], radius)
        labels[b, idx] = lab
        means = []
        for c in range(lab.max(initial=-1) + 1):
            members = idx[lab == c]
            means.append(final[b, members].mean(axis=0))
            leading = members[final_leader[b, members]]
            owner[b, members] = leading.min() if len(leading) else -1
        means = np.array(means).reshape(-1, final.shape[-1])
        if exponents is not None:  # back in the trajectory's own units
            means = np.ldexp(means, int(exponents[b]))
        centers.append(torch.as_tensor(means, dtype=path.dtype))
    labels_t, owner_t = torch.as_tensor(labels), torch.as_tensor(owner)
    if single:
        return Clusters(labels=labels_t[0], centers=centers[0], leader=owner_t[0])
    return Clusters(labels=labels_t, centers=centers, leader=owner_t)
