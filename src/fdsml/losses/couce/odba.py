"""ODBA: orthogonal debiasing against a dictionary of gated embeddings."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch import nn

from fdsml.losses.couce.settings import CouCESettings


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
        batch = class_variances(m.float(), labels)
        for tracked, variance in zip((self.var_intra, self.var_inter), batch):  # no host sync: where(), not if
            moved = tracked.mul(self.momentum).add(variance, alpha=1 - self.momentum)
            tracked.copy_(torch.where(self.initialized, moved, variance))
        self.initialized.fill_(True)


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
        slots = (self.position + torch.arange(rows.shape[0], device=self.memory.device)) % self.size  # on the device
        self.memory[slots] = rows
        self.position.copy_((self.position + rows.shape[0]) % self.size)
        self.count.copy_((self.count + rows.shape[0]).clamp(max=self.size))

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
