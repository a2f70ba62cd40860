import pytest

from hpcguard.connectors.errors import ParseError
from hpcguard.connectors.hostlist import compress_hostlist, expand_hostlist


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
])
def test_expand(expr, expected):
    assert expand_hostlist(expr) == expected


@pytest.mark.parametrize("bad", ["n[1-", "n1]", "n[[1]]", "n[a-b]", "n[3-1]", "n[1,,2]", "n1,,n2", "n1;rm", "n 1",
                                 "n[]"])
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
