"""The Habitat console's own site: its home page and which framework apps operators see."""
