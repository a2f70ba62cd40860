"""UC metric and rates (seed 000 §4.1, Eqs. 4.2–4.4, Tab. 4.1, Fig. 4.12)."""
import math
from fractions import Fraction

import numpy as np
import pytest

from hpcguard.models.metrics import (MOGON_P_OK, rates, roc, sample_probabilities, uc_crossing,
                                     uc_probability)

# Seed 000, Tab. 4.1 (rows with a published fpr): (reference, fpr, UC(1,024) as printed).
# A ">x" entry means the paper printed ">x".
TABLE_4_1 = [
    ("BlueGene/L[132]", "0.33", ">0.9999"),
    ("RWTH Aachen[108]", "0.00156", "0.7978"),
    ("Unnamed SC[134]", "0.23", ">0.9999"),
    ("Google[135]", "0.11", ">0.9999"),
    ("Custom Hadoop[137]", "0.091", ">0.9999"),
    ("Custom Misc.[96]", "0.008", ">0.9997"),
    ("Baidu [97]", "0.0037", ">0.9775"),
    ("MOGON this@1NN", "0.00292", "0.9498"),
    ("MOGON this@2NN", "0.00088", "0.5945"),
    ("MOGON this@4NN", "0.00040", "0.3361"),
    ("MOGON this@6NN", "0.00020", "0.1852"),
    ("MOGON this@6NN RNN", "0.00004", "0.0417"),
]


@pytest.mark.parametrize("name,fpr_text,uc_text", TABLE_4_1)
def test_table_4_1_uc_1024_follows_from_fpr(name, fpr_text, uc_text):
    """UC(1,024) of Tab. 4.1 recomputed from its fpr column with Eq. 4.4 (P(K) = 1).

    The printed fpr is rounded to its last digit, so the printed UC must lie between
    UC at the lower and the upper rounding bound (plus half a unit of UC's last digit).
    """
    fpr = float(fpr_text)
    half = 0.5 * 10.0 ** -(len(fpr_text.split(".")[1]))
    lo, hi = uc_probability(max(fpr - half, 0.0), 1024), uc_probability(fpr + half, 1024)
    assert lo <= uc_probability(fpr, 1024) <= hi
    if uc_text.startswith(">"):
        assert uc_probability(fpr, 1024) > float(uc_text[1:])
    else:
        published = float(uc_text)
        unit = 0.5 * 10.0 ** -(len(uc_text.split(".")[1]))
        assert lo - unit <= published <= hi + unit
        assert hi - lo < 0.02  # the rounding interval is narrow enough for the check to bite


def test_text_examples_and_figure_4_12_labels():
    # §4.1.4: UC(0.01, 256) = 0.9236 (printed truncated) and UC(0.0001, 1024) = 0.0973
    assert uc_probability(0.01, 256) == pytest.approx(0.9236, abs=1.5e-4)
    assert uc_probability(0.0001, 1024) == pytest.approx(0.0973, abs=1e-4)
    # §4.3 / Fig. 4.10: six networks unanimous (fpr 0.00020): 4.99 % at 256, 33.62 % at 2,048, 55.94 % at 4,096
    assert uc_probability(0.00020, [256, 2048, 4096]) == pytest.approx([0.0499, 0.3362, 0.5594], abs=2e-4)
    # Fig. 4.12: the LSTM vote's fpr implied by its UC(1,024) = 0.0417 gives 28.93 % at 8,192 nodes
    implied_fpr = -math.log1p(-0.0417) / 1024
    assert round(implied_fpr, 5) == 0.00004                       # the printed fpr of Tab. 4.1 d)
    assert uc_probability(implied_fpr, 8192) == pytest.approx(0.2893, abs=1e-3)
    assert uc_crossing(implied_fpr, 0.05) > 1024                  # "below 5 % up to 1,024 nodes"


def test_eq_4_2_sample_probabilities_eq_4_3():
    s = sample_probabilities(tpr=0.99, fpr=0.01, p_ok=MOGON_P_OK)
    assert s["s_fp"] == pytest.approx(0.01, rel=1e-4)
    assert s["s_tp"] == pytest.approx(0.000009865647, rel=1e-6)
    assert s["s_fp"] + s["s_tp"] + s["s_fn"] + s["s_tn"] == pytest.approx(1.0)


def test_uc_equals_binomial_sum_of_eq_4_4_exactly():
    for fpr, p_ok, n in [(0.01, 1.0, 37), (0.2, MOGON_P_OK, 25), (0.00292, 0.999, 60)]:
        f, pk = Fraction(fpr), Fraction(p_ok)
        a, b = pk * f, pk * (1 - f)
        exact = sum(math.comb(n, x) * a ** x * b ** (n - x) for x in range(1, n + 1))
        assert uc_probability(fpr, n, p_ok) == pytest.approx(float(exact), rel=1e-12)


def test_uc_is_stable_and_vectorised_up_to_2_pow_18():
    n = 2 ** np.arange(19)
    tiny = uc_probability(1e-12, n)
    assert tiny.shape == (19,)
    assert tiny[-1] == pytest.approx(2 ** 18 * 1e-12, rel=1e-6)   # naive 1 − (1 − f)^n loses this
    assert np.all(np.diff(uc_probability(1e-4, n)) > 0)
    assert uc_probability(0.0, 2 ** 18) == 0.0 and uc_probability(1.0, 3) == 1.0
    with pytest.raises(ValueError):
        uc_probability(1.5, 10)
    with pytest.raises(ValueError):
        uc_probability(0.1, -1)


@pytest.mark.parametrize("fpr,level,p_ok", [(0.00004, 0.05, 1.0), (0.00156, 0.5, 1.0), (0.001, 0.3, MOGON_P_OK)])
def test_uc_crossing_is_the_first_node_count_reaching_the_level(fpr, level, p_ok):
    n = uc_crossing(fpr, level, p_ok)
    assert uc_probability(fpr, n, p_ok) >= level > uc_probability(fpr, n - 1, p_ok)


def test_uc_crossing_unreachable_with_p_ok_below_one():
    assert uc_crossing(1e-9, 0.5, p_ok=0.99) is None


def test_rates_and_roc():
    r = rates([1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 0, 1, 0, 0, 0, 0])
    assert (r["tpr"], r["fnr"], r["fpr"], r["tnr"]) == pytest.approx((2 / 3, 1 / 3, 0.2, 0.8))
    assert (r["ppv"], r["fdr"]) == pytest.approx((2 / 3, 1 / 3))
    assert math.isnan(rates([1, 0], [0, 0])["ppv"])
    c = roc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    assert c["auc"] == pytest.approx(0.75)
    with pytest.raises(ValueError):
        roc([1, 1], [0.2, 0.3])
    with pytest.raises(ValueError):
        rates([1, 0, 1], [1, 0])
