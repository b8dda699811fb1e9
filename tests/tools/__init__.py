"""Developer tools kept with the tests (build comparison)."""
