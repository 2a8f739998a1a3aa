"""Count words in the files given on the command line (written for the cidermill demo)."""

import collections
import sys


def count_words(paths):
    counts = collections.Counter()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                counts.update(word.lower() for word in line.split())
    return counts


if __name__ == "__main__":
    for word, n in count_words(sys.argv[1:]).most_common(20):
        print(f"{n:8d} {word}")
