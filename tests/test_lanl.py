"""LANL failure records: loader and seed 003 Tab. 7.2 Weibull parameters of systems 8 and 18."""
import lzma

import numpy as np
import pytest

from hpcguard.connectors.lanl import interarrival_hours, load_lanl
from hpcguard.models.distributions import fit_weibull
from _shared import SHARED_DATA

LANL = SHARED_DATA / "lanl-failures/LA-UR-05-7318-failure-data-1996-2005.csv.xz"
HEADER = ("System,machine type,nodes,procstot,procsinnode,nodenum,nodenumz,node install,node prod,node decom,"
          "fru type,mem,cputype,memtype,num intercon,purpose,Prob Started,Prob Fixed,Down Time,Facilities,"
          "Hardware,Human Error,Network,Undetermined,Software,Same Event\n")


@pytest.fixture(scope="module")
def lanl():
    if not LANL.exists():
        pytest.skip(f"LANL data not present at {LANL}")
    return load_lanl(LANL)


@pytest.mark.parametrize("system, nodes, shape, scale", [(8, 164, 0.7111, 67.375), (18, 1024, 0.8170, 6.6293)])
def test_tab_7_2_weibull_parameters(lanl, system, nodes, shape, scale):
    # seed 003 Tab. 7.2 (from Wan et al.): LANL system 8 shape 0.7111 scale 67.375 h,
    # system 18 shape 0.8170 scale 6.6293 h. MLE on system-wide inter-arrival times with zero
    # gaps dropped reproduces the shapes to 4 digits; system 8's scale comes out 67.354 h
    # (0.03 % lower; the published fit probably differs in how simultaneous records were merged).
    gaps, dropped = interarrival_hours(lanl, system)
    fit = fit_weibull(gaps)
    assert lanl.system_nodes[system] == nodes
    assert fit.shape == pytest.approx(shape, abs=5e-4)
    assert fit.scale_h == pytest.approx(scale, rel=1e-3)
    assert dropped > 0 and np.all(gaps > 0)


def test_loader_fields(lanl):
    assert len(lanl) == 23739
    assert lanl.start_s.dtype == float and np.all(np.isfinite(lanl.start_s))
    assert set(lanl.cause) >= {"Hardware", "Software"}


def test_small_file_and_bad_rows(tmp_path):
    rows = ["8,cluster,164,328,2,1,0,,,,,,,,,compute,1/1/2003 10:00,1/1/2003 11:00,60,,Memory,,,,,No\n",
            "8,cluster,164,328,2,2,1,,,,,,,,,compute,1/1/2003 10:00,1/1/2003 11:00,60,,,,,,Kernel,No\n",
            "8,cluster,164,328,2,3,2,,,,,,,,,compute,1/1/2003 12:30,,,,,,,,,No\n",
            "8,cluster,164,328,2,3,2,,,,,,,,,compute,1/2/2003 12:30,,,,,,,,,No\n"]
    p = tmp_path / "f.csv.xz"
    p.write_bytes(lzma.compress((HEADER + "".join(rows)).encode()))
    f = load_lanl(p)
    gaps, dropped = interarrival_hours(f, 8)
    assert dropped == 1
    np.testing.assert_allclose(gaps, [2.5, 24.0])
    assert list(f.cause[:3]) == ["Hardware", "Software", "Unknown"]
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + rows[0].replace("1/1/2003 10:00", "yesterday"))
    with pytest.raises(ValueError, match="bad.csv:2"):
        load_lanl(bad)
    with pytest.raises(ValueError, match="need at least 3"):
        interarrival_hours(f, 99)
