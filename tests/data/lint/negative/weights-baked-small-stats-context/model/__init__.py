"""Request and response types of the scoring service."""
