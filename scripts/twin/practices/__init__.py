"""One module per practice family, each exporting ROWS (twin/api.py)."""
