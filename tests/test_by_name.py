"""`sched/hosts.py` `by_name`: a placement (host index -> slots) named in name order,
whether or not the hosts were numbered in name order; and `by_label`, on which it is
built: host indices sorted by label, whatever the numbering."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from xce.sched.hosts import by_label, by_name


def test_numbered_in_name_order() -> None:
    names = ["h01", "h02", "h03", "h04"]
    assert list(by_name({3: 1, 0: 2, 2: 4}, names).items()) == [
        ("h01", 2), ("h03", 4), ("h04", 1)
    ]


def test_numbered_out_of_name_order() -> None:
    # (a burst host that joined later, and a host renamed in place)
    names = ["n2", "n10", "a1", "n3"]
    assert list(by_name({0: 1, 1: 2, 2: 3, 3: 4}, names).items()) == [
        ("a1", 3), ("n10", 2), ("n2", 1), ("n3", 4)
    ]
    assert list(by_name({1: 5}, names).items()) == [("n10", 5)]


@given(
    st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=12, unique=True),
    st.data(),
)
def test_any_numbering(names: list[str], data: st.DataObject) -> None:
    chosen = data.draw(st.sets(st.integers(0, len(names) - 1), min_size=1))
    placed = {index: data.draw(st.integers(1, 64)) for index in chosen}
    on = by_name(placed, names)
    assert list(on) == sorted(names[i] for i in chosen)
    assert on == {names[i]: slots for i, slots in placed.items()}


def test_by_label_in_and_out_of_index_order() -> None:
    assert by_label({3, 0, 2}, ["a", "b", "c", "d"]) == [0, 2, 3]
    # (a provisioned host labelled before every name, and one after: sched/labels.py)
    labels = ["h1", "\x00burst-2", "h2", "\U0010ffffburst-1"]
    assert by_label([0, 1, 2, 3], labels) == [1, 0, 2, 3]


@given(
    st.lists(st.text(max_size=3), min_size=1, max_size=12),
    st.data(),
)
def test_by_label_is_a_sort_by_label(labels: list[str], data: st.DataObject) -> None:
    """Whatever the labels and the numbering, the indices come by label, equal labels
    (none in a cluster: a host's label holds its name) by index."""
    indices = data.draw(st.lists(st.sampled_from(range(len(labels))), unique=True))
    assert by_label(indices, labels) == sorted(indices, key=lambda i: (labels[i], i))



@given(st.sets(st.integers(0, 40)))
def test_by_label_of_hosts_numbered_in_label_order(indices: set[int]) -> None:
    """`indexed` (state.indexed_labels): the labels ascend with the index, and a sort
    of the indices is the sort by label."""
    labels = [f"h{i:03d}" for i in range(41)]
    assert by_label(indices, labels, indexed=True) == by_label(indices, labels)
