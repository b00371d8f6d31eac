def median(values):
    return sum(values) / len(values)
