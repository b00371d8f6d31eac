# stats.py: what the variants try to get right.
def median(values):
    raise NotImplementedError
