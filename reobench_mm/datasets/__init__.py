"""Dataset helpers and the embedded synthetic demo data."""
