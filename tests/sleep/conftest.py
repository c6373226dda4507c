"""Fixtures the sleep tests share: the two people of the demo."""

from __future__ import annotations

import pytest

from tests.factories import PersonFactory


@pytest.fixture
def leo():
    return PersonFactory(slug="leo", display_name="Leo")


@pytest.fixture
def maya():
    return PersonFactory(slug="maya", display_name="Maya")
