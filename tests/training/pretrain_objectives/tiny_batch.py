"""A tiny batch every objective's test reads by hand: embeddings given as the model's output, descriptors and labels."""

import math

import torch
from torch import nn


class Fixed(nn.Module):
    """A 'model' whose embeddings are its input rows: the losses can be computed by hand."""

    def forward(self, images):
        return images


LABELS = torch.tensor([0, 0, 0, 1, 1, 1])
PSI = torch.tensor([[0.0], [1.0], [3.0], [0.0], [2.0], [3.0]])
EMBEDDINGS = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 0.0], [3.0, 1.0], [5.0, 5.0]])
# Filter same, positives by the descriptor (d_Psi = |psi_a - psi_c|), read off PSI by hand:
SAME_TRIPLETS = [(0, 1, 2), (1, 0, 2), (2, 1, 0), (3, 4, 5), (4, 5, 3), (5, 4, 3)]
MARGIN = 0.5


def hinge(a, p, n, margin=MARGIN):
    e = EMBEDDINGS.tolist()
    return max(0.0, math.dist(e[a], e[p]) - math.dist(e[a], e[n]) + margin)


def hand_batch(embeddings=EMBEDDINGS):
    return {"image": embeddings, "label": LABELS, "psi": PSI}


# The label-only batches: P = 2 classes x K = 2, every (anchor, same-class, other-class) triplet, psi ignored.
PAIRS_LABELS = torch.tensor([0, 0, 1, 1])
LABEL_TRIPLETS = [(0, 1, 2), (0, 1, 3), (1, 0, 2), (1, 0, 3), (2, 3, 0), (2, 3, 1), (3, 2, 0), (3, 2, 1)]


def triplet_list(indices):
    return sorted(zip(*(t.tolist() for t in indices)))


def label_triplets(labels):
    """Every (anchor, classmate, other-class) triplet, read literally."""
    labels = labels.tolist()
    n = range(len(labels))
    return [(a, p, q) for a in n for p in n for q in n if p != a and labels[p] == labels[a] and labels[q] != labels[a]]
