"""pytest plugin for wacoll's users (placeholder, filled in below)."""
