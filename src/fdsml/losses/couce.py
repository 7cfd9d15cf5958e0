"""CouCE: training-only debiasing regularisers for any proxy-based metric-learning loss (METHOD.md section 7).

The trunk is split into Stage 1 and Stage 2 (:class:`StageSplit`, a view on the timm model, no
copied model code). MSRCI perturbs the amplitude spectrum of the Stage-1 map in concentric
frequency bands (:class:`MSRCI`); both the clean and the intervened map go through the shared
Stage 2, giving ``m`` and ``m~``. The total loss is

    L = L_DML(m) + lambda_orth L_orth + lambda_inv L_inv + lambda_cov L_cov

with L_inv the symmetric KL between the proxy-similarity distributions of the two views
(:func:`invariance_loss`), L_orth the squared cosine between ``m`` and its retrieved spurious
component (:class:`ODBA`, :func:`orthogonality_loss`) and L_cov the off-diagonal covariance of
the batch embedding (:func:`decorrelation_loss`).

Nothing is added to the model: the hooks that run Stage 2 on both views are removed after each
forward, and every CouCE state (dictionary, variance statistics) belongs to the objective, so a
CouCE-trained model file is a plain model file.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist
import torch.nn.functional as F
from timm.models.resnet import ResNet
from timm.models.vision_transformer import VisionTransformer
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from fdsml.config import ConfigError, require_fraction, require_positive
from fdsml.losses.precision import full_precision
from fdsml.losses.proxy import build_proxy_loss
from fdsml.seeds import step_seed

BAND_SCHEDULES = ("uniform", "linear", "exponential", "custom")
RESNET_STAGES = ("layer1", "layer2", "layer3", "layer4")


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CouCESettings:
    """Every CouCE switch and hyper-parameter; the defaults are METHOD.md section 7's.

    Modules: ``msrci`` (intervention + L_inv), ``odba`` (L_orth), ``decorrelation`` (L_cov).
    ``split_at``: ``"auto"`` (ResNet: after layer3; ViT: after block 3/4 of the depth),
    ``"layer2"``..``"layer4"`` or ``"blocks.<i>"`` (0-based, inclusive).
    ``band_schedule`` lays out the band edges on the normalised frequency radius (see
    :func:`frequency_band_edges`); ``band_edges`` (upper edges, the last 1.0) only with ``"custom"``.
    ``min_scale`` floors the amplitude factor ``1 + gamma dA`` (it acts only when gamma > 1 - min_scale).
    ``gate_tau``/``gate_delta`` are tau_g/delta of the variance gate; ``orthogonality`` is
    ``"soft"`` (the L_orth penalty) or ``"hard"`` (L_DML sees ``m`` with ``z`` projected out).
    """

    msrci: bool = True
    odba: bool = True
    decorrelation: bool = True
    split_at: str = "auto"
    gammas: tuple[float, ...] = (0.2, 0.4, 0.8)
    band_schedule: Literal["uniform", "linear", "exponential", "custom"] = "uniform"
    band_edges: tuple[float, ...] | None = None
    min_scale: float = 0.05
    temperature: float = 0.1
    stop_gradient: bool = True
    momentum: float = 0.999
    gate: bool = True
    gate_tau: float = 1.0
    gate_delta: float = 1e-4
    dictionary_size: int = 2048
    detach: bool = True
    orthogonality: Literal["soft", "hard"] = "soft"
    lambda_orth: float = 0.05
    lambda_inv: float = 0.1
    lambda_cov: float = 0.04
    eps: float = 1e-8

    def __post_init__(self):
        if not self.gammas:
            raise ConfigError("gammas: give at least one band strength")
        for gamma in self.gammas:
            require_positive("gammas", gamma)
        frequency_band_edges(self.band_schedule, len(self.gammas), self.band_edges)
        parse_split_point(self.split_at)
        require_fraction("min_scale", self.min_scale, inclusive_zero=False)
        require_positive("temperature", self.temperature)
        if not 0.0 <= self.momentum < 1.0:
            raise ConfigError(f"momentum: must lie in [0, 1), got {self.momentum!r}")
        if self.gate_delta < 0:
            raise ConfigError(f"gate_delta: must be >= 0, got {self.gate_delta!r}")
        require_positive("dictionary_size", self.dictionary_size)
        for name in ("lambda_orth", "lambda_inv", "lambda_cov"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: must be >= 0, got {getattr(self, name)!r}")
        require_positive("eps", self.eps)

    @classmethod
    def baseline(cls, **overrides: Any) -> CouCESettings:
        """Every module off: the objective is then the plain proxy loss."""
        return cls(**{"msrci": False, "odba": False, "decorrelation": False, **overrides})


# --------------------------------------------------------------------------------------------
# Stage split
# --------------------------------------------------------------------------------------------


def parse_split_point(split_at: str) -> tuple[str, int | None]:
    """``("auto", None)``, ``("resnet", stage index 0..3)`` or ``("vit", block index)``."""
    if split_at == "auto":
        return "auto", None
    if split_at in RESNET_STAGES:
        return "resnet", RESNET_STAGES.index(split_at)
    match = re.fullmatch(r"blocks\.(\d+)", split_at)
    if match:
        return "vit", int(match.group(1))
    raise ConfigError(f"split_at: {split_at!r} is not accepted; use auto, {', '.join(RESNET_STAGES)} or blocks.<i>")


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DistributedDataParallel wrapper (the model itself otherwise)."""
    return model.module if isinstance(model, DistributedDataParallel) else model


class StageSplit:
    """Stage 1 / Stage 2 of an ``EmbeddingModel`` whose trunk is a timm ResNet or VisionTransformer.

    ResNet: Stage 1 = stem .. ``layerK``, Stage 2 = the remaining layers, pooling, head.
    ViT: Stage 1 = patch embedding, position embedding .. block ``i``, Stage 2 = the remaining
    blocks, final norm, pooling, head. ``stage2(stage1(x))`` is ``model(x)``, op for op.
    The activation between the stages is the trunk's own (ViT: tokens); :meth:`intervene`
    applies a map-to-map function to its spatial part (ViT: patch tokens on their grid, the
    class/register tokens left as they are).
    """

    def __init__(self, model: nn.Module, split_at: str = "auto"):
        self.model = unwrap(model)
        self.trunk = self.model.backbone
        kind, index = parse_split_point(split_at)
        if isinstance(self.trunk, ResNet):
            if kind == "vit":
                raise ValueError(f"split_at {split_at!r} names ViT blocks but the trunk is a ResNet")
            self.kind, self.index = "resnet", RESNET_STAGES.index("layer3") if index is None else index
            self.split_module = getattr(self.trunk, RESNET_STAGES[self.index])
        elif isinstance(self.trunk, VisionTransformer):
            if kind == "resnet":
                raise ValueError(f"split_at {split_at!r} names a ResNet stage but the trunk is a ViT")
            depth = len(self.trunk.blocks)
            self.kind, self.index = "vit", max(3 * depth // 4 - 1, 0) if index is None else index
            if not 0 <= self.index < depth:
                raise ValueError(f"split_at blocks.{self.index}: the ViT has blocks 0..{depth - 1}")
            self.split_module = self.trunk.blocks[self.index]
        else:
            raise ValueError(f"CouCE splits timm ResNet and VisionTransformer trunks, not {type(self.trunk).__name__}")
        self.grid: tuple[int, int] | None = None

    def _remember_grid(self, x: torch.Tensor) -> None:
        if self.kind == "vit":
            self.grid = tuple(self.trunk.patch_embed.dynamic_feat_size(tuple(x.shape[-2:])))

    def stage1(self, x: torch.Tensor) -> torch.Tensor:
        """Images in [0, 1] -> the activation after the split point (ResNet map, ViT tokens)."""
        self._remember_grid(x)
        x = self.model.normalise(x)
        trunk = self.trunk
        if self.kind == "resnet":
            x = trunk.maxpool(trunk.act1(trunk.bn1(trunk.conv1(x))))
            for name in RESNET_STAGES[: self.index + 1]:
                x = getattr(trunk, name)(x)
            return x
        x = trunk.norm_pre(trunk.patch_drop(trunk._pos_embed(trunk.patch_embed(x))))
        for block in trunk.blocks[: self.index + 1]:
            x = block(x)
        return x

    def stage2(self, h: torch.Tensor) -> torch.Tensor:
        """The activation after the split point -> the model's output (embedding)."""
        trunk = self.trunk
        if self.kind == "resnet":
            for name in RESNET_STAGES[self.index + 1 :]:
                h = getattr(trunk, name)(h)
        else:
            for block in trunk.blocks[self.index + 1 :]:
                h = block(h)
            h = trunk.norm(h)
        return self.model.head(trunk.forward_head(h))

    def to_map(self, h: torch.Tensor) -> torch.Tensor:
        """The spatial part of the activation as (B, C, H, W)."""
        if self.kind == "resnet":
            return h
        patches = h[:, self.trunk.num_prefix_tokens :]
        return patches.transpose(1, 2).reshape(h.shape[0], h.shape[2], *self.grid)

    def from_map(self, feature_map: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """Put a (B, C, H, W) map back in the activation's layout (ViT: after ``like``'s prefix tokens)."""
        if self.kind == "resnet":
            return feature_map
        patches = feature_map.flatten(2).transpose(1, 2)
        return torch.cat([like[:, : self.trunk.num_prefix_tokens], patches], dim=1)

    def intervene(self, h: torch.Tensor, function: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """The activation with ``function`` applied to its spatial map."""
        return self.from_map(function(self.to_map(h)), h)

    def joint_forward(
        self, model: nn.Module, x: torch.Tensor, function: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """``model(x)`` with Stage 2 run on ``[h; intervene(h)]``: (2B, d), clean rows first.

        Stage 1 runs once. Going through ``model``'s own forward (a forward hook on the split
        module, removed on return) keeps DistributedDataParallel's gradient synchronisation.
        Every BatchNorm after the split normalises both views with the clean view's batch
        statistics, and only the clean view updates its running statistics
        (:func:`clean_view_batchnorm`): the clean rows are exactly ``model(x)``'s, and the
        statistics the saved model keeps are those of clean images alone.
        """
        self._remember_grid(x)
        after_split = False

        def both_views(module: nn.Module, inputs: Any, output: torch.Tensor) -> torch.Tensor:
            nonlocal after_split
            after_split = True
            return torch.cat([output, self.intervene(output, function)], dim=0)

        def on_clean_statistics(norm: nn.modules.batchnorm._BatchNorm, original: Callable) -> Callable:
            return lambda rows: clean_view_batchnorm(norm, rows, original) if after_split else original(rows)

        norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        handle = self.split_module.register_forward_hook(both_views)
        try:
            for norm in norms:
                norm.forward = on_clean_statistics(norm, norm.forward)
            return model(x)
        finally:
            handle.remove()
            for norm in norms:
                vars(norm).pop("forward", None)


def clean_view_batchnorm(
    norm: nn.modules.batchnorm._BatchNorm, rows: torch.Tensor, forward: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """BatchNorm ``norm`` (its own ``forward``) on ``[clean; intervened]`` rows, the intervention kept out of its statistics.

    In training mode the clean half goes through ``forward`` alone (normalised by, and updating
    the running statistics from, its own batch statistics); the intervened half is normalised
    with those same clean batch statistics and updates nothing. In eval mode (frozen BatchNorm)
    both halves use the running statistics.
    """
    if not norm.training:
        return forward(rows)
    clean, intervened = rows.chunk(2)
    clean_out = forward(clean)
    axes = [0, *range(2, rows.ndim)]
    mean = clean.float().mean(axes, keepdim=True)
    variance = clean.float().var(axes, unbiased=False, keepdim=True)
    normalised = (intervened.float() - mean) * torch.rsqrt(variance + norm.eps)
    if norm.affine:
        shape = (1, -1) + (1,) * (rows.ndim - 2)
        normalised = normalised * norm.weight.view(shape) + norm.bias.view(shape)
    return torch.cat([clean_out, normalised.to(clean_out.dtype)])


# --------------------------------------------------------------------------------------------
# MSRCI: multi-scale random amplitude intervention
# --------------------------------------------------------------------------------------------


def frequency_band_edges(schedule: str, n_bands: int, custom: tuple[float, ...] | None = None) -> tuple[float, ...]:
    """Upper edges of ``n_bands`` bands on the normalised frequency radius [0, 1] (the last is 1).

    Band widths are proportional to 1 (``uniform``), to k = 1..S (``linear``) or to 2^(k-1)
    (``exponential``): the latter two give the low frequencies narrower bands. ``custom``
    takes ``custom`` as given (strictly increasing, ending at 1).
    """
    if schedule not in BAND_SCHEDULES:
        raise ConfigError(f"band_schedule: {schedule!r} is not accepted; choose one of {', '.join(BAND_SCHEDULES)}")
    if schedule == "custom":
        if custom is None or len(custom) != n_bands:
            raise ConfigError(f"band_edges: the custom schedule needs {n_bands} upper edges (one per gamma), got {custom!r}")
        if not 0 < custom[0] or any(b <= a for a, b in zip(custom, custom[1:])) or custom[-1] != 1.0:
            raise ConfigError(f"band_edges: must increase strictly inside (0, 1] and end at 1.0, got {custom!r}")
        return tuple(float(edge) for edge in custom)
    if custom is not None:
        raise ConfigError(f"band_edges: only used with band_schedule custom, not {schedule!r}")
    width = {"uniform": lambda k: 1.0, "linear": lambda k: k + 1.0, "exponential": lambda k: 2.0**k}[schedule]
    cumulative = list(itertools.accumulate(width(k) for k in range(n_bands)))
    return (*(edge / cumulative[-1] for edge in cumulative[:-1]), 1.0)


def frequency_radius(height: int, width: int, device: torch.device | None = None) -> torch.Tensor:
    """(H, W) radius of each FFT bin's frequency, normalised so that DC is 0 and the (Nyquist, Nyquist) corner 1.

    Symmetric under f -> -f, so a radius-dependent real factor keeps the spectrum Hermitian.
    """
    fy = torch.fft.fftfreq(height, device=device, dtype=torch.float64).abs()
    fx = torch.fft.fftfreq(width, device=device, dtype=torch.float64).abs()
    return (torch.sqrt(fy[:, None] ** 2 + fx[None, :] ** 2) / math.sqrt(0.5)).float()


def band_index(radius: torch.Tensor, edges: tuple[float, ...]) -> torch.Tensor:
    """The band (0 = lowest) of every frequency bin: band s holds edges[s-1] < r <= edges[s]."""
    inner = torch.tensor(edges[:-1], dtype=radius.dtype, device=radius.device)
    return torch.bucketize(radius, inner)


def amplitude_scales(
    gammas: torch.Tensor, batch: int, channels: int, generator: torch.Generator | None, min_scale: float
) -> torch.Tensor:
    """(B, C, S) factors 1 + gamma_s dA_s, dA_s ~ U(-1, 1) per sample, channel and band, floored at ``min_scale``.

    The factor lies in [1 - gamma, 1 + gamma]: the floor acts only when gamma > 1 - ``min_scale``.
    """
    delta = torch.rand(batch, channels, gammas.numel(), generator=generator, device=gammas.device) * 2 - 1
    return (1 + gammas * delta).clamp_min(min_scale)


def scale_amplitude(h: torch.Tensor, scales: torch.Tensor, bands: torch.Tensor) -> torch.Tensor:
    """real(iFFT2(A * factor * exp(j Phi))) per channel: amplitude scaled band by band, phase kept.

    ``scales`` (B, C, S) are positive reals, so multiplying the complex spectrum by them scales
    its modulus and leaves its argument unchanged.
    """
    spectrum = torch.fft.fft2(h)
    return torch.fft.ifft2(spectrum * scales[..., bands]).real


class MSRCI(nn.Module):
    """Multi-scale random amplitude intervention on a (B, C, H, W) feature map; the identity in eval mode.

    Per sample, channel and band, the amplitude of every frequency in the band is multiplied by
    1 + gamma_s dA_s with dA_s ~ U(-1, 1) (see :func:`amplitude_scales`); bands are concentric in
    the normalised frequency radius (:func:`frequency_band_edges`). Computed in float32 (FFTs have no
    bfloat16), returned in the input's dtype.
    """

    def __init__(
        self,
        gammas: tuple[float, ...] = (0.2, 0.4, 0.8),
        schedule: str = "uniform",
        band_edges: tuple[float, ...] | None = None,
        min_scale: float = 0.05,
    ):
        super().__init__()
        self.edges = frequency_band_edges(schedule, len(gammas), band_edges)
        self.register_buffer("gammas", torch.tensor(gammas, dtype=torch.float32), persistent=False)
        self.min_scale = min_scale

    def forward(self, h: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if not self.training:
            return h
        batch, channels, height, width = h.shape
        bands = band_index(frequency_radius(height, width, h.device), self.edges)
        with torch.autocast(device_type=h.device.type, enabled=False):
            scales = amplitude_scales(self.gammas.to(h.device), batch, channels, generator, self.min_scale)
            return scale_amplitude(h.float(), scales, bands).to(h.dtype)


# --------------------------------------------------------------------------------------------
# L_inv: invariance of the proxy-similarity distributions
# --------------------------------------------------------------------------------------------


def proxy_matrix(loss: nn.Module) -> torch.Tensor:
    """(n_proxies, d): a pytorch-metric-learning loss's proxies (SoftTriple: all its centres)."""
    if hasattr(loss, "proxies"):
        return loss.proxies
    if hasattr(loss, "fc") and hasattr(loss, "centers_per_class"):
        return loss.fc.t()
    raise ValueError(f"{type(loss).__name__} has no proxies (expected .proxies or SoftTriple's .fc)")


def proxy_log_probabilities(m: torch.Tensor, proxies: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(m . P^T / tau) with ``m`` and ``P`` L2-normalised (cosine similarities)."""
    return F.log_softmax(F.normalize(m, dim=1) @ F.normalize(proxies, dim=1).t() / temperature, dim=1)


def kl_divergence(target_log: torch.Tensor, prediction_log: torch.Tensor) -> torch.Tensor:
    """Per-row KL(target || prediction) from log-probabilities."""
    return (target_log.exp() * (target_log - prediction_log)).sum(dim=1)


def invariance_loss(
    m: torch.Tensor, m_tilde: torch.Tensor, proxies: torch.Tensor, temperature: float = 0.1, stop_gradient: bool = True
) -> torch.Tensor:
    """L_inv = mean_i [KL(p_i || p~_i) + KL(p~_i || p_i)] over the proxy-similarity distributions.

    With ``stop_gradient`` each direction's target (the first argument) is detached, so each
    branch is trained only by the term in which it is the prediction.
    """
    log_p = proxy_log_probabilities(m, proxies, temperature)
    log_q = proxy_log_probabilities(m_tilde, proxies, temperature)
    target_p, target_q = (log_p.detach(), log_q.detach()) if stop_gradient else (log_p, log_q)
    return (kl_divergence(target_p, log_q) + kl_divergence(target_q, log_p)).mean()


# --------------------------------------------------------------------------------------------
# ODBA: orthogonal debiasing against a dictionary of gated embeddings
# --------------------------------------------------------------------------------------------


def class_variances(m: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel (intra-class, inter-class) variance of a batch, each sample weighted equally.

    Var_intra = mean_i (m_i - mu_{y_i})^2, Var_inter = mean_i (mu_{y_i} - mu)^2; they add up to
    the batch's total (biased) variance.
    """
    classes, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    sums = torch.zeros(classes.numel(), m.shape[1], dtype=m.dtype, device=m.device).index_add_(0, inverse, m)
    class_means = (sums / counts[:, None].to(m.dtype))[inverse]
    intra = ((m - class_means) ** 2).mean(dim=0)
    inter = ((class_means - m.mean(dim=0)) ** 2).mean(dim=0)
    return intra, inter


def variance_gate(
    var_intra: torch.Tensor, var_inter: torch.Tensor, tau: float = 1.0, delta: float = 1e-4, eps: float = 1e-8
) -> torch.Tensor:
    """w_c = sigmoid(Var_intra / (Var_inter + eps) - tau_g) * 1[Var_intra + Var_inter > delta].

    High for channels that vary within classes more than between them (nuisance), 0 for inert ones.
    """
    active = (var_intra + var_inter > delta).to(var_intra.dtype)
    return torch.sigmoid(var_intra / (var_inter + eps) - tau) * active


def attention_weights(m: torch.Tensor, dictionary: torch.Tensor) -> torch.Tensor:
    """A_i = softmax(m_i . D^T / sqrt(d))."""
    return torch.softmax(m @ dictionary.t() / math.sqrt(m.shape[1]), dim=1)


def spurious_component(m: torch.Tensor, dictionary: torch.Tensor, detach: bool = True) -> torch.Tensor:
    """z_i = A_i . D, detached by default (no gradient through the attention or the dictionary)."""
    z = attention_weights(m, dictionary) @ dictionary
    return z.detach() if detach else z


def orthogonality_loss(m: torch.Tensor, z: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """L_orth = mean_i (<m_i, z_i> / (||m_i|| ||z_i|| + eps))^2."""
    cosine = (m * z).sum(dim=1) / (m.norm(dim=1) * z.norm(dim=1) + eps)
    return (cosine**2).mean()


def project_out(m: torch.Tensor, z: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Hard alternative to L_orth: m_i - (<m_i, z_i> / (||z_i||^2 + eps)) z_i."""
    return m - ((m * z).sum(dim=1, keepdim=True) / ((z * z).sum(dim=1, keepdim=True) + eps)) * z


def gather_across_ranks(tensor: torch.Tensor) -> torch.Tensor:
    """Every rank's rows, concatenated in rank order (the tensor itself outside torch.distributed).

    Rows may differ in number between ranks; the result is the same on every rank, so state
    updated from it stays identical across replicas. No gradient flows through it.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return tensor
    tensor = tensor.detach().contiguous()
    world = dist.get_world_size()
    sizes = [torch.zeros(1, dtype=torch.long, device=tensor.device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([tensor.shape[0]], device=tensor.device))
    largest = int(max(size.item() for size in sizes))
    padded = torch.zeros(largest, *tensor.shape[1:], dtype=tensor.dtype, device=tensor.device)
    padded[: tensor.shape[0]] = tensor
    gathered = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded)
    return torch.cat([rows[: int(size.item())] for rows, size in zip(gathered, sizes)])


class VarianceTracker(nn.Module):
    """EMA of the per-channel intra- and inter-class variance; the first batch initialises it.

    (Starting from zeros with momentum 0.999 would mark every channel inert for thousands of steps.)
    """

    def __init__(self, dim: int, momentum: float = 0.999):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("var_intra", torch.zeros(dim))
        self.register_buffer("var_inter", torch.zeros(dim))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool))

    @torch.no_grad()
    def update(self, m: torch.Tensor, labels: torch.Tensor) -> None:
        intra, inter = class_variances(m.float(), labels)
        if not bool(self.initialized):
            self.var_intra.copy_(intra)
            self.var_inter.copy_(inter)
            self.initialized.fill_(True)
            return
        self.var_intra.mul_(self.momentum).add_(intra, alpha=1 - self.momentum)
        self.var_inter.mul_(self.momentum).add_(inter, alpha=1 - self.momentum)


class FIFODictionary(nn.Module):
    """The newest ``size`` enqueued rows, in a ring buffer; :meth:`entries` lists them oldest first."""

    def __init__(self, size: int, dim: int):
        super().__init__()
        self.size = size
        self.register_buffer("memory", torch.zeros(size, dim))
        self.register_buffer("position", torch.zeros((), dtype=torch.long))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    @torch.no_grad()
    def enqueue(self, rows: torch.Tensor) -> None:
        rows = rows.detach()[-self.size :].to(self.memory.dtype)
        slots = (int(self.position) + torch.arange(rows.shape[0], device=self.memory.device)) % self.size
        self.memory[slots] = rows
        self.position.fill_((int(self.position) + rows.shape[0]) % self.size)
        self.count.fill_(min(int(self.count) + rows.shape[0], self.size))

    def entries(self) -> torch.Tensor:
        """(n, dim), n = min(enqueued, size), oldest first."""
        if int(self.count) < self.size:
            return self.memory[: int(self.count)]
        return torch.roll(self.memory, -int(self.position), dims=0)


class ODBA(nn.Module):
    """Orthogonal debiasing: variance statistics, the gate, the dictionary, and L_orth against it."""

    def __init__(self, dim: int, settings: CouCESettings):
        super().__init__()
        self.settings = settings
        self.variances = VarianceTracker(dim, settings.momentum)
        self.dictionary = FIFODictionary(settings.dictionary_size, dim)

    def gate(self) -> torch.Tensor:
        """The current per-channel gate W (all ones when the gate is switched off)."""
        if not self.settings.gate:
            return torch.ones_like(self.variances.var_intra)
        s = self.settings
        return variance_gate(self.variances.var_intra, self.variances.var_inter, s.gate_tau, s.gate_delta, s.eps)

    def spurious(self, m: torch.Tensor) -> torch.Tensor | None:
        """z for each row of ``m`` from the dictionary as it stands (None while it is empty)."""
        entries = self.dictionary.entries()
        if entries.shape[0] == 0:
            return None
        return spurious_component(m, entries.to(m.dtype), self.settings.detach)

    @torch.no_grad()
    def update(self, m: torch.Tensor, labels: torch.Tensor) -> None:
        """Fold the batch (all ranks') into the statistics, then enqueue its gated embeddings W * m."""
        m, labels = gather_across_ranks(m.detach().float()), gather_across_ranks(labels)
        self.variances.update(m, labels)
        self.dictionary.enqueue(self.gate() * m)


# --------------------------------------------------------------------------------------------
# L_cov and the total
# --------------------------------------------------------------------------------------------


def decorrelation_loss(m: torch.Tensor) -> torch.Tensor:
    """L_cov = (1/d) sum_{i != j} Cov(M_i, M_j)^2 over the embedding dimensions (unbiased batch covariance)."""
    if m.shape[0] < 2:
        return m.new_zeros(())
    centred = m - m.mean(dim=0)
    covariance = centred.t() @ centred / (m.shape[0] - 1)
    off_diagonal = covariance - torch.diag(torch.diagonal(covariance))
    return (off_diagonal**2).sum() / m.shape[1]


class CouCE(nn.Module):
    """A proxy loss plus the CouCE regularisers: ``forward(m, labels, m_tilde=None) -> (loss, parts)``.

    ``m`` is the clean embedding, ``m_tilde`` the intervened view's (needed when ``msrci`` is on).
    L_orth is computed against the dictionary before this batch is enqueued (a sample never
    attends to itself); the statistics and dictionary are updated in training mode only. Parts
    always hold ``dml``, ``orth``, ``inv``, ``cov`` (0 for modules that are off) for comparable logs.
    Every term, ODBA's attention and its statistics included, is computed in float32 whatever the
    forward pass used (bf16 would make L_inv between two close views many times too large).
    """

    def __init__(self, loss: nn.Module, embedding_dim: int, settings: CouCESettings | None = None):
        super().__init__()
        self.loss = loss
        self.settings = settings or CouCESettings()
        self.odba = ODBA(embedding_dim, self.settings) if self.settings.odba else None

    @full_precision
    def forward(self, m: torch.Tensor, labels: torch.Tensor, m_tilde: torch.Tensor | None = None):
        s = self.settings
        zero = m.new_zeros(())
        orth, inv, cov, m_dml = zero, zero, zero, m
        parts: dict[str, Any] = {}
        if self.odba is not None:
            z = self.odba.spurious(m)
            if z is not None:
                orth = orthogonality_loss(m, z, s.eps)
                if s.orthogonality == "hard":
                    m_dml = project_out(m, z, s.eps)
            parts["odba_gate"] = self.odba.gate().mean()
        dml = self.loss(m_dml, labels)
        total = dml
        if self.odba is not None and s.orthogonality == "soft":
            total = total + s.lambda_orth * orth
        if s.msrci:
            if m_tilde is None:
                raise ValueError("CouCE with msrci on needs the intervened view's embedding m_tilde")
            inv = invariance_loss(m, m_tilde, proxy_matrix(self.loss), s.temperature, s.stop_gradient)
            total = total + s.lambda_inv * inv
        if s.decorrelation:
            cov = decorrelation_loss(m)
            total = total + s.lambda_cov * cov
        if self.odba is not None and self.training:
            self.odba.update(m, labels)
        parts.update(dml=dml.detach(), orth=orth.detach(), inv=inv.detach(), cov=cov.detach())
        return total, parts


# --------------------------------------------------------------------------------------------
# The training-loop objective
# --------------------------------------------------------------------------------------------


class CouCEObjective(nn.Module):
    """Retrieval fine-tuning with a proxy loss under CouCE: ``forward(model, batch, step) -> (loss, parts)``.

    With MSRCI on, one forward of ``model`` runs Stage 1 once and Stage 2 on the clean and the
    intervened map (:meth:`StageSplit.joint_forward`); otherwise it is the plain forward. The
    intervention's draws come from a generator seeded by (seed, step, rank). With every module
    off the loss is exactly that of the plain proxy loss on the model's embedding.
    """

    def __init__(
        self,
        loss: nn.Module,
        embedding_dim: int,
        settings: CouCESettings | None = None,
        proxy_lr_multiplier: float = 100.0,
        seed: int = 0,
    ):
        super().__init__()
        self.settings = settings or CouCESettings()
        self.couce = CouCE(loss, embedding_dim, self.settings)
        s = self.settings
        self.msrci = MSRCI(s.gammas, s.band_schedule, s.band_edges, s.min_scale) if s.msrci else None
        self.proxy_lr_multiplier = proxy_lr_multiplier
        self.seed = seed

    def _generator(self, device: torch.device, step: int) -> torch.Generator:
        rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        return torch.Generator(device=device).manual_seed(step_seed(self.seed, step, rank))

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        images, labels = batch["image"], batch["label"]
        if self.msrci is None:
            return self.couce(model(images), labels)
        generator = self._generator(images.device, step)
        split = StageSplit(model, self.settings.split_at)
        both = split.joint_forward(model, images, lambda h: self.msrci(h, generator))
        m, m_tilde = both[: images.shape[0]], both[images.shape[0] :]
        return self.couce(m, labels, m_tilde)

    def param_groups(self) -> list[dict]:
        return [{"params": list(self.couce.loss.parameters()), "lr_multiplier": self.proxy_lr_multiplier, "weight_decay": 0.0}]


def build_couce_objective(
    settings: CouCESettings,
    loss_name: str,
    num_classes: int,
    embedding_dim: int,
    proxy_lr_multiplier: float = 100.0,
    *,
    seed: int = 0,
    loss_options: Mapping[str, Any] | None = None,
) -> CouCEObjective:
    """A :class:`CouCEObjective` around the named pytorch-metric-learning proxy loss."""
    loss = build_proxy_loss(loss_name, num_classes, embedding_dim, **dict(loss_options or {}))
    return CouCEObjective(loss, embedding_dim, settings, proxy_lr_multiplier, seed)
