"""Grad-CAM finds the one region that tells two classes apart; map similarity is a cosine."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fdsml.analysis.gradcam import class_prototypes, grad_cam, map_cosine_similarity, prototype_targets
from fdsml.analysis.models import embed
from fdsml.models import build_model

SIZE = 32
HALF = SIZE // 2


def planted(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Noise images; class 1 alone has a bright square inside the top-left quadrant."""
    images = torch.randn(n, 3, SIZE, SIZE, generator=generator) * 0.3
    labels = torch.arange(n) % 2
    images[labels == 1, :, 2 : HALF - 2, 2 : HALF - 2] = 2.0
    return images, labels


@pytest.fixture(scope="module")
def trained_model():
    """A ResNet-18 at 32 px trained for a few steps to tell the two classes apart (BatchNorm statistics frozen)."""
    torch.manual_seed(0)
    model = build_model("resnet18", img_size=SIZE, embedding_dim=8).eval()
    classifier = torch.nn.Linear(8, 2)
    optimizer = torch.optim.Adam([*model.parameters(), *classifier.parameters()], lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(10):
        images, labels = planted(8, generator)
        loss = F.cross_entropy(classifier(model(images)), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


def test_grad_cam_highlights_the_planted_region(trained_model):
    images, labels = planted(16, torch.Generator().manual_seed(1))
    labels = labels.numpy()
    targets = prototype_targets(embed(trained_model, images), labels)
    maps = grad_cam(trained_model, images, targets, layer="layer3")  # 2 x 2 cells at 32 px, as layer4 at 64 px
    assert maps.shape == (16, SIZE, SIZE) and maps.max() == pytest.approx(1.0)
    square = maps[labels == 1]
    in_quadrant = square[:, :HALF, :HALF].sum(axis=(1, 2)) / square.sum(axis=(1, 2))
    assert in_quadrant.min() > 0.5  # the quadrant is a quarter of the image
    peaks = np.array([np.unravel_index(m.argmax(), m.shape) for m in square])
    assert (peaks < HALF).all()


def test_the_target_is_own_prototype_cosine_minus_the_others():
    embeddings = np.array([[1.0, 0.0], [2.0, 0.2], [0.0, 1.0], [0.1, 3.0], [-1.0, -1.0], [-2.0, -1.5]])
    labels = np.array([4, 4, 7, 7, 9, 9])
    classes, prototypes = class_prototypes(embeddings, labels)
    assert classes.tolist() == [4, 7, 9]
    np.testing.assert_allclose(np.linalg.norm(prototypes, axis=1), 1.0)
    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    cosines = unit @ prototypes.T
    own = cosines[np.arange(6), [0, 0, 1, 1, 2, 2]]
    expected = own - (cosines.sum(axis=1) - own) / 2
    scores = prototype_targets(embeddings, labels)(torch.tensor(embeddings, dtype=torch.float32), torch.arange(6))
    np.testing.assert_allclose(scores.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_map_similarity_is_the_cosine_of_flattened_maps():
    a = np.array([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]])
    b = np.array([[[0.0, 1.0], [0.0, 0.0]], [[2.0, 2.0], [2.0, 2.0]], [[1.0, 0.0], [0.0, 0.0]]])
    similarity = map_cosine_similarity(a, b)
    np.testing.assert_allclose(similarity[:2], [0.0, 1.0])
    assert np.isnan(similarity[2])  # an empty map has no direction
