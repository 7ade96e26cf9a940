"""One module per practice family, each exporting ROWS (twin/api.py); a module whose name
starts with "_" holds what several of them share (_training.py, _data.py) and is not one."""
