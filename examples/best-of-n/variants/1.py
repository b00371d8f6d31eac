def median(values):
    return sorted(values)[len(values) // 2]
