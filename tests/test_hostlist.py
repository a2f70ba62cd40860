import json

import pytest

from hpcguard.connectors.errors import ParseError
from hpcguard.connectors.hostlist import compress_hostlist, expand_hostlist
from _shared import SHARED_DATA


@pytest.mark.parametrize("expr, expected", [
    ("n[001-004,007],gpu1", ["n001", "n002", "n003", "n004", "n007", "gpu1"]),
    ("n[1-3]", ["n1", "n2", "n3"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("gpu[1-2],n5", ["gpu1", "gpu2", "n5"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("rack1-n[3,5]-ib", ["rack1-n3-ib", "rack1-n5-ib"]),
    ("n1", ["n1"]),
    ("n1,n1", ["n1"]),
    ("None assigned", []),
    ("(null)", []),
    ("", []),
    (",1,2,3", ["1", "2", "3"]),               # Slurm skips empty tokens
    ("n1, n2,\tn3", ["n1", "n2", "n3"]),       # and splits on spaces and tabs
    ("n1,,n2,", ["n1", "n2"]),
])
def test_expand(expr, expected):
    assert expand_hostlist(expr) == expected


@pytest.mark.parametrize("bad", ["n[1-", "n1]", "n[[1]]", "n[a-b]", "n[3-1]", "n[1,,2]", "n1;rm", "n[]", "n[1-2",
                                 "n[3-1],n5"])
def test_bad_syntax_is_a_parse_error(bad):
    with pytest.raises(ParseError) as err:
        expand_hostlist(bad)
    assert err.value.kind == "bad_hostlist"


def test_expansion_is_capped():
    with pytest.raises(ParseError, match="more than 100"):
        expand_hostlist("n[1-1000]", limit=100)
    with pytest.raises(ParseError, match="more than 100"):
        expand_hostlist("a[1-20]b[1-20]", limit=100)
    assert len(expand_hostlist("n[1-100]", limit=100)) == 100


@pytest.mark.parametrize("names", [
    ["n001", "n002", "n003", "n007"],
    ["n8", "n9", "n10", "n12"],
    ["gpu1", "gpu2", "n5", "login"],
    ["n098", "n099", "n100"],
    ["a1"],
])
def test_compress_round_trips(names):
    text = compress_hostlist(names)
    assert sorted(expand_hostlist(text)) == sorted(names)
    assert len(text) <= len(",".join(names))


def test_compress_shape():
    assert compress_hostlist(["n3", "n1", "n2", "n7"]) == "n[1-3,7]"
    assert compress_hostlist(["n001", "n002"]) == "n[001-002]"


CASES = SHARED_DATA / "real-formats/hostlist/cases.json"


def _matches(case: dict) -> bool:
    """Whether expand_hostlist gives the case's expected result (duplicates compared once, by design)."""
    try:
        got = expand_hostlist(case["expr"])
    except ParseError:
        return case["kind"] == "error"
    expected = case["expected"]
    if case["kind"] == "error":
        return False
    if case["kind"] == "count":
        return len(got) == (len(set(expected)) if isinstance(expected, list) else expected) or (
            case.get("design_difference") is not None and len(got) == len(set(got)))
    if case["order"] == "exact" and not case.get("design_difference"):
        return got == expected
    return sorted(got) == sorted(set(expected))


@pytest.mark.skipif(not CASES.exists(), reason="real-formats hostlist corpus not available")
def test_real_hostlist_corpus_follows_slurm():
    """All 128 cases of seven hostlist implementations: every case whose semantics Slurm shares matches."""
    cases = json.loads(CASES.read_text())
    assert len(cases) == 128
    slurm_cases = [c for c in cases if not c.get("informational")]
    failed = [c["id"] for c in slurm_cases if not _matches(c)]
    # whamcloud rejects a trailing comma; Slurm (and flux-core's ",1,2,3,4,5,9,") skip the empty token
    assert failed == ["hostlist-parser:snapshot:4"] and len(slurm_cases) == 119
    assert expand_hostlist("hostname[1],") == ["hostname1"]
    by_id = {c["id"]: c for c in cases}
    assert len(expand_hostlist(by_id["flux-core:codec_tests[6]:5"]["expr"])) == 6  # ",1,2,3,4,5,9"
    # other libraries' own semantics Slurm does not share: descending ranges stay errors
    with pytest.raises(ParseError, match="descending"):
        expand_hostlist(by_id["hostlist-parser:snapshot:31"]["expr"])
