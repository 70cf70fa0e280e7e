"""FrozenDict (pmap.py): a map built whole and only read, such as a parked decision's intents."""
import copy
import pickle

import pytest

from controller_core.pmap import NO_ENTRIES, FrozenDict
from controller_core.values import TopicPartition

TP = TopicPartition("t", 0)


def test_equal_to_a_dict_of_the_same_items_and_hashed_by_them():
    f = FrozenDict({TP: (("elect", "offline"),)})
    assert f == {TP: (("elect", "offline"),)}
    assert hash(f) == hash(FrozenDict({TP: (("elect", "offline"),)}))
    assert f != NO_ENTRIES and not NO_ENTRIES


@pytest.mark.parametrize("change", [
    lambda f: f.__setitem__(TP, ()), lambda f: f.__delitem__(TP), lambda f: f.clear(), lambda f: f.pop(TP),
    lambda f: f.popitem(), lambda f: f.setdefault(TP, ()), lambda f: f.update({TP: ()}),
])
def test_refuses_every_change(change):
    f = FrozenDict({TP: (("bump",),)})
    with pytest.raises(TypeError, match="not changed once made"):
        change(f)
    assert f == {TP: (("bump",),)}


def test_in_place_union_refused_and_plain_union_is_a_new_dict():
    f = FrozenDict({TP: ()})
    with pytest.raises(TypeError):
        f |= {TopicPartition("t", 1): ()}
    assert f | {TopicPartition("t", 1): ()} == {TP: (), TopicPartition("t", 1): ()}
    assert len(f) == 1


def test_pickles_and_copies_as_itself():
    f = FrozenDict({TP: (("shrink", 3),)})
    for made in (pickle.loads(pickle.dumps(f)), copy.copy(f), copy.deepcopy(f)):
        assert made == f and type(made) is FrozenDict
