"""Test support for the ALFWorld plugin's test files: a skip marker for machines without
alfworld/textworld, and an autouse fixture that points $ALFWORLD_DATA at a temp folder
(importing alfworld creates that folder) and closes the games kept open, and
`fresh_game_store`, a fresh game store (`@pytest.mark.usefixtures("fresh_game_store")`). Import them into a test module to use them."""

from __future__ import annotations

import pytest

from workbench_alfworld import game_store, gamegen, games, grounding

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


@pytest.fixture
def fresh_game_store(tmp_path, monkeypatch):
    """A fresh game store and no remembered verdicts."""
    monkeypatch.setenv(game_store.STORE_ENV, str(tmp_path / "store"))
    monkeypatch.setattr(game_store, "_store_override", None)
    gamegen._verdicts.clear()
    gamegen._rejections.clear()
    yield tmp_path / "store"
    gamegen._verdicts.clear()
