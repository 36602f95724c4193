"""``Condition``: validation, the clean normalisation, its names (key, tag, settings) and
how it stands in for the ``(corruption, severity)`` pair."""
import pickle
from dataclasses import FrozenInstanceError

import numpy as np
import pytest

from reobench_corruptions import CLEAN, CLEAN_NAME, CONDITION_FIELDS, Condition
from reobench_mm.utils.config import check_corruption_args, corruption_tag


# ----------------------------------------------------------------------------- validation

@pytest.mark.parametrize('arguments,error,match', [
    (dict(corruption='fog', severity=1), KeyError, "unknown corruption 'fog'.*valid:"),
    (dict(corruption='cloud_shadow', severity=1), KeyError, 'geofm_calibration'),
    (dict(corruption='cloud', severity=6), ValueError, r'severity must be an integer in 0\.\.5'),
    (dict(corruption='cloud', severity=2.5), ValueError, 'severity'),
    (dict(corruption='cloud', severity=True), ValueError, 'severity'),
    (dict(corruption='cloud', severity=None), ValueError, 'severity'),
    (dict(corruption='cloud', severity=1, seed=-1), ValueError, 'seed'),
    (dict(corruption='cloud', severity=1, seed='1'), ValueError, 'seed'),
    (dict(corruption='cloud', severity=1, protocol='imagenet_c'), ValueError,
     'unknown protocol'),
    (dict(corruption='rotate', severity=1, border='wrap'), ValueError, 'border must be one of'),
    (dict(corruption=3, severity=1), TypeError, 'string'),
])
def test_invalid_conditions_are_refused(arguments, error, match):
    with pytest.raises(error, match=match):
        Condition(**arguments)


def test_clean_is_normalised_and_keeps_its_settings():
    for clean in (Condition(), Condition('clean', 3), Condition('cloud', 0),
                  Condition('rotate', 0)):
        assert clean == CLEAN and clean.is_clean
        assert (clean.corruption, clean.severity) == (CLEAN_NAME, 0)
        assert clean.key == clean.tag == CLEAN_NAME and clean.category == CLEAN_NAME
        assert not clean.geometric
    seeded = Condition('haze', 0, seed=4, protocol='reobench', border='constant')
    assert seeded.is_clean and seeded.seed == 4 and seeded.border == 'constant'
    assert seeded != CLEAN and seeded.clean() == seeded
    assert Condition('cloud', np.int64(2), seed=np.int64(1)).settings() == dict(
        corruption='cloud', severity=2, seed=1, protocol='reobench', border='reflect')


def test_properties():
    rotate = Condition('rotate', 2)
    assert rotate.geometric and rotate.category == 'geometric' and not rotate.is_clean
    assert not Condition('haze', 1).geometric
    assert Condition('haze', 1).category == 'environmental'
    assert rotate.with_corruption('haze', 4) == Condition('haze', 4)
    moved = Condition('rotate', 2, seed=3, border='constant').with_corruption('cloud', 1)
    assert (moved.seed, moved.border) == (3, 'constant')


# ----------------------------------------------------------------------------- names

TAG_CASES = [
    dict(),
    dict(corruption='cloud', severity=0),
    dict(corruption='gaussian_noise', severity=5),
    dict(corruption='motion_blur', severity=3, protocol='geofm_calibration'),
    dict(corruption='rotate', severity=2, seed=1, border='constant'),
    dict(corruption='haze', severity=2, border='constant'),
    dict(corruption='translate', severity=4, seed=7),
    dict(corruption='clean', severity=0, seed=2, protocol='geofm_calibration'),
]


@pytest.mark.parametrize('settings', TAG_CASES)
def test_tags_keys_and_settings_round_trip(settings):
    condition = Condition(**settings)
    assert condition.tag == corruption_tag(**settings)
    assert condition.settings() == check_corruption_args(**{**CLEAN.settings(), **settings})
    assert list(condition.settings()) == list(CONDITION_FIELDS)
    assert Condition.from_settings(condition.settings()) == condition
    assert Condition.from_key(condition.key, condition.protocol, condition.seed,
                              condition.border) == condition
    assert str(condition) == condition.key


def test_known_tags_and_keys():
    assert Condition('gaussian_noise', 5).tag == 'gaussian_noise_s5'
    assert Condition('motion_blur', 3, protocol='geofm_calibration').tag == \
        'geofm_calibration_motion_blur_s3'
    assert Condition('rotate', 2, seed=1, border='constant').tag == 'rotate_s2_constant_seed1'
    assert Condition('haze', 2, border='constant').tag == 'haze_s2'
    assert Condition('cloud', 3).key == 'cloud@3' and CLEAN.key == 'clean'


def test_tags_are_safe_names_and_keys_read_back():
    """Tags name files and logger keys (TensorBoard replaces anything but letters, digits,
    '_', '-', '.' and '/' in a tag): every condition of both protocols, with every
    setting, has such a tag, unique among them; every key reads back as its condition."""
    import re
    from reobench_corruptions import list_corruptions
    tags = set()
    for protocol in ('reobench', 'geofm_calibration'):
        for name in list_corruptions(protocol):
            for severity in range(1, 6):
                for seed, border in ((0, 'reflect'), (3, 'constant')):
                    condition = Condition(name, severity, seed=seed, protocol=protocol,
                                          border=border)
                    assert re.fullmatch(r'[A-Za-z0-9_.-]+', condition.tag), condition.tag
                    tags.add(condition.tag)
                    assert Condition.from_key(condition.key, protocol=protocol, seed=seed,
                                              border=border) == condition
    assert len(tags) == 2 * 5 * sum(len(list_corruptions(p))
                                    for p in ('reobench', 'geofm_calibration'))


def test_bad_keys_and_settings():
    with pytest.raises(ValueError, match="a condition key is 'clean'"):
        Condition.from_key('cloud3')
    with pytest.raises(ValueError, match="a condition key is 'clean'"):
        Condition.from_key('cloud@x')
    with pytest.raises(ValueError, match='unknown condition settings'):
        Condition.from_settings(dict(corruption='cloud', severity=1, sed=2))
    with pytest.raises(KeyError, match='fog'):
        Condition.from_key('fog@2')


def test_coerce_and_of():
    assert Condition.coerce('cloud@3', seed=2) == Condition('cloud', 3, seed=2)
    assert Condition.coerce(('cloud', 3), border='constant').border == 'constant'
    assert Condition.coerce(['clean', 0]) == CLEAN
    given = Condition('haze', 1, seed=5)
    assert Condition.coerce(given, seed=0) is given
    with pytest.raises(TypeError, match='a condition is a Condition'):
        Condition.coerce(3)
    assert Condition.of('cloud', 2, seed=3) == Condition('cloud', 2, seed=3)
    assert Condition.of(given) is given
    with pytest.raises(TypeError, match='not both'):
        Condition.of(given, seed=1)
    with pytest.raises(ValueError, match='severity'):
        Condition.of('cloud')


# ----------------------------------------------------------------------------- as a pair

def test_a_condition_stands_in_for_its_pair():
    condition = Condition('cloud', 3, seed=1, border='constant')
    name, severity = condition
    assert (name, severity) == ('cloud', 3) == condition.pair
    assert condition[0] == 'cloud' and condition[1] == 3 and condition[:] == ('cloud', 3)
    assert condition['seed'] == 1 and condition['border'] == 'constant'
    with pytest.raises(KeyError, match='not a condition field'):
        condition['colour']
    assert condition == ('cloud', 3) and ('cloud', 3) == condition
    assert condition != ('cloud', 2) and condition != ('cloud', 3, 1)
    assert condition != 'cloud@3' and condition != ['cloud', 3]
    assert [Condition('haze', 1), CLEAN] == [('haze', 1), ('clean', 0)]


def test_conditions_with_other_settings_differ_but_each_equals_the_pair():
    plain, seeded = Condition('cloud', 3), Condition('cloud', 3, seed=1)
    assert plain != seeded and plain == ('cloud', 3) == seeded
    assert hash(plain) == hash(seeded) == hash(('cloud', 3))
    assert len({plain, seeded}) == 2
    assert Condition('cloud', 3, protocol='reobench') == plain


def test_dicts_keyed_by_pairs_and_by_conditions_agree():
    by_pair = {('clean', 0): 80.0, ('cloud', 3): 60.0}
    assert by_pair[CLEAN] == 80.0 and by_pair[Condition('cloud', 3, seed=4)] == 60.0
    assert Condition('cloud', 3) in by_pair and Condition('cloud', 2) not in by_pair
    by_condition = {CLEAN: 80.0, Condition('cloud', 3): 60.0}
    assert by_condition[('clean', 0)] == 80.0 and by_condition[('cloud', 3)] == 60.0
    assert ('cloud', 3) in by_condition and ('haze', 3) not in by_condition
    assert by_pair == {CLEAN: 80.0, Condition('cloud', 3): 60.0}
    # between conditions the other settings count
    assert Condition('cloud', 3, seed=1) not in by_condition


def test_ordering_and_pickling():
    conditions = [Condition('haze', 1), CLEAN, Condition('cloud', 2, seed=1),
                  Condition('cloud', 2)]
    assert sorted(conditions) == [CLEAN, Condition('cloud', 2), Condition('cloud', 2, seed=1),
                                  Condition('haze', 1)]
    assert sorted([('haze', 1), CLEAN, ('cloud', 2)]) == [CLEAN, ('cloud', 2), ('haze', 1)]
    assert Condition('cloud', 2) < ('cloud', 3) and ('cloud', 1) < Condition('cloud', 2)
    assert Condition('cloud', 2) <= ('cloud', 2) and Condition('haze', 1) > CLEAN
    seeded = Condition('rotate', 4, seed=3, protocol='reobench', border='constant')
    again = pickle.loads(pickle.dumps(seeded))
    assert again == seeded and again.settings() == seeded.settings()
    with pytest.raises(FrozenInstanceError):
        seeded.seed = 1
