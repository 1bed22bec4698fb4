"""Test support for the ALFWorld plugin's test files: a skip marker for machines without
alfworld/textworld, and an autouse fixture that points $ALFWORLD_DATA at a temp folder
(importing alfworld creates that folder) and closes the games kept open. Import both into a test module to use them."""

from __future__ import annotations

import pytest

from workbench_alfworld import games, grounding

needs_alfworld = pytest.mark.skipif(
    not games.alfworld_available(), reason="alfworld/textworld not installed (pip install alfworld textworld)"
)


@pytest.fixture(scope="module", autouse=True)
def alfworld_data_dir(tmp_path_factory):
    """Importing alfworld creates $ALFWORLD_DATA: keep it in a temp folder (with no games);
    afterwards close the games the grounding checks kept open."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ALFWORLD_DATA", str(tmp_path_factory.mktemp("alfworld_data")))
    yield
    mp.undo()
    grounding.close_all()
