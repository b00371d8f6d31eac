"""Counts the words of stdin; prints the five most common, one per line."""
import collections
import sys

words = sys.stdin.read().lower().split()
for word, n in collections.Counter(words).most_common(5):
    print(f"{n:3d} {word}")
