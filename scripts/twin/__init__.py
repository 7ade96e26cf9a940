"""The PyTorch side of the suite: the core's networks (models.py), the contract a
practice's twin fulfils (api.py), the practices (practices/), their timing (bench.py)."""
