"""A small model server (fixture)."""
