"""wordfreq: the words of a text, most frequent first."""
import collections
import re


def top(text, n):
    """The n most frequent words of text, lower-cased, as (word, count), ties by word."""
    counts = collections.Counter(re.findall(r"[a-z']+", text.lower()))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]
