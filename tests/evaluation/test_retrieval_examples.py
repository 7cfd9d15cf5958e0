"""The retrieval examples' picture: each query's nearest gallery items by cosine, framed by whether they share its class."""

import numpy as np
from matplotlib.colors import to_rgba

from fdsml.evaluation.retrieval_examples import nearest_neighbours, top_k_figure


def test_nearest_neighbours_by_cosine_by_hand_never_the_query_itself():
    # directions 0, 10, 80 and 180 degrees; the second is ten times longer, which cosine ignores
    angles = np.radians([0.0, 10.0, 80.0, 180.0])
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1) * np.array([[1.0], [10.0], [1.0], [1.0]])
    assert nearest_neighbours(vectors, vectors, 2, same_set=True).tolist() == [[1, 2], [0, 2], [1, 0], [2, 1]]
    assert nearest_neighbours(vectors, vectors, 1, same_set=False).tolist() == [[0], [1], [2], [3]]
    assert nearest_neighbours(vectors[:1], vectors[1:], 3, same_set=False).tolist() == [[0, 1, 2]]


def test_equally_near_items_keep_the_gallerys_order_and_a_zero_vector_is_no_error():
    gallery = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    assert nearest_neighbours(np.array([[1.0, 0.0]]), gallery, 4, same_set=False).tolist() == [[1, 2, 0, 3]]
    # 60 items in three directions, of growing length: the 20 along the query tie, and come in gallery order (numpy's
    # default sort, unstable beyond 16 items, would shuffle them)
    directions = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    many = directions[np.arange(60) % 3] * np.arange(1, 61)[:, None]
    assert nearest_neighbours(np.array([[2.0, 0.0]]), many, 20, same_set=False).tolist() == [list(range(0, 60, 3))]


def test_the_figure_frames_each_neighbour_green_for_its_class_and_red_for_another():
    query_images = np.stack([np.full((3, 2, 2), 10, np.uint8), np.full((3, 2, 2), 20, np.uint8)])  # channels first
    gallery_images = np.arange(3, dtype=np.uint8)[:, None, None] * np.ones((3, 2, 2), np.uint8) * 50  # one channel
    figure = top_k_figure(query_images, np.array([0, 1]), gallery_images, np.array([0, 1, 1]), np.array([[0, 1], [2, 0]]))
    axes = np.asarray(figure.axes).reshape(2, 3)
    assert [[axis.get_title() for axis in row] for row in axes] == [["query", "#1", "#2"], ["query", "#1", "#2"]]
    colours = {"query": "black", "right": "tab:green", "wrong": "tab:red"}
    expected = [["query", "right", "wrong"], ["query", "right", "wrong"]]
    for row, kinds in zip(axes, expected):
        for axis, kind in zip(row, kinds):
            assert axis.title.get_color() == colours[kind] and axis.title.get_fontsize() == 7
            assert {spine.get_edgecolor() for spine in axis.spines.values()} == {to_rgba(colours[kind])}
            assert {spine.get_linewidth() for spine in axis.spines.values()} == {3}
            assert axis.get_xticks().size == 0 and axis.get_yticks().size == 0
    shown = lambda axis: axis.get_images()[0].get_array()
    assert shown(axes[0, 0]).shape == (2, 2, 3) and int(shown(axes[1, 0])[0, 0, 0]) == 20  # channels last for imshow
    assert [int(shown(axis)[0, 0]) for axis in axes[1, 1:]] == [100, 0] and axes[0, 1].get_images()[0].get_cmap().name == "gray"
    assert figure.texts[0].get_text() == "Top retrievals (green: same class, red: other class)"
