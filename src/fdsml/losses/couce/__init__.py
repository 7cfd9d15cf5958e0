"""CouCE: training-only debiasing regularisers for any proxy-based metric-learning loss (docs/method.md §7).

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

from fdsml.losses.couce.settings import CouCESettings
from fdsml.losses.couce.stage_split import RESNET_STAGES, StageSplit, clean_view_batchnorm, parse_split_point, unwrap
from fdsml.losses.couce.msrci import (
    BAND_SCHEDULES,
    MSRCI,
    amplitude_scales,
    band_index,
    frequency_band_edges,
    frequency_radius,
    scale_amplitude,
)
from fdsml.losses.couce.invariance import invariance_loss, kl_divergence, proxy_log_probabilities, proxy_matrix
from fdsml.losses.couce.odba import (
    ODBA,
    FIFODictionary,
    VarianceTracker,
    attention_weights,
    class_variances,
    gather_across_ranks,
    orthogonality_loss,
    project_out,
    spurious_component,
    variance_gate,
)
from fdsml.losses.couce.decorrelation import decorrelation_loss
from fdsml.losses.couce.objective import CouCE, CouCEObjective, build_couce_objective

__all__ = [
    "BAND_SCHEDULES",
    "CouCE",
    "CouCEObjective",
    "CouCESettings",
    "FIFODictionary",
    "MSRCI",
    "ODBA",
    "RESNET_STAGES",
    "StageSplit",
    "VarianceTracker",
    "amplitude_scales",
    "attention_weights",
    "band_index",
    "build_couce_objective",
    "class_variances",
    "clean_view_batchnorm",
    "decorrelation_loss",
    "frequency_band_edges",
    "frequency_radius",
    "gather_across_ranks",
    "invariance_loss",
    "kl_divergence",
    "orthogonality_loss",
    "parse_split_point",
    "project_out",
    "proxy_log_probabilities",
    "proxy_matrix",
    "scale_amplitude",
    "spurious_component",
    "unwrap",
    "variance_gate",
]
