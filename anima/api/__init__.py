"""The DRF API under /api/: shared parsing, errors, permissions and routing."""
