# The project's check: the step whose result picks the winner.
from stats import median

cases = [([1], 1), ([1, 2, 10], 2), ([3, 1, 2], 2), ([4, 1, 3, 2], 2.5), ([5, 5, 1, 9, 7, 3], 5), ([-2, -1], -1.5)]
for values, expected in cases:
    got = median(values)
    assert got == expected, f"median({values}) = {got}, expected {expected}"
print(f"{len(cases)} cases passed")
