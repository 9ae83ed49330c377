#!/usr/bin/env python3
"""Writes COUNT blocks of 4 KiB of `compare`'s point-read text into DIRECTORY (00000, 00001, ...).

A port of BenchSupport's `ContentGenerator(seed: 42).textBlock(size: 4096)` (Benchmarks/Sources/
BenchSupport/Corpus.swift, Random.swift): the same random generator, vocabulary and Zipf draw, so the
blocks have the same statistics (their zstd -3 frames average 1,952 bytes, as the SQLite contender's
rows do). Only the 16-letter random prefix is drawn differently. Usage: text-blocks.py COUNT DIRECTORY
"""
import os
import sys

MASK = (1 << 64) - 1


class DeterministicRandom:
    def __init__(self, seed):
        x = seed

        def split_mix():
            nonlocal x
            x = (x + 0x9E3779B97F4A7C15) & MASK
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
            return z ^ (z >> 31)

        self.state = [split_mix() for _ in range(4)]

    def next(self):
        s0, s1, s2, s3 = self.state
        result = (s1 * 5) & MASK
        result = ((((result << 7) | (result >> 57)) & MASK) * 9) & MASK
        t = (s1 << 17) & MASK
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = ((s3 << 45) | (s3 >> 19)) & MASK
        self.state = [s0, s1, s2, s3]
        return result

    def below(self, bound):
        return (self.next() * bound) >> 64

    def unit(self):
        return (self.next() >> 11) * 2.0 ** -53


SYLLABLES = ["ka", "lo", "mi", "ren", "sta", "ver", "to", "en", "qu", "ar", "is", "ion", "the", "de", "or",
             "al", "an", "pro", "con", "tra", "men", "ti", "ble", "ous", "ing", "er", "at", "un", "re", "com"]


def main():
    count, directory = int(sys.argv[1]), sys.argv[2]
    random = DeterministicRandom(42)
    vocabulary, words = set(), []
    while len(words) < 4096:
        parts = 1 + random.below(4)
        word = "".join(SYLLABLES[random.below(len(SYLLABLES))] for _ in range(parts))
        if word not in vocabulary:
            vocabulary.add(word)
            words.append(word.encode())
    words.sort(key=len)  # common words first: the Zipf draw favours low indices

    def zipf(n):
        u = random.unit()
        return min(n - 1, int(n * u * u * u))

    def block(size):
        buffer = bytearray(0x61 + random.below(26) for _ in range(16))
        sentence_start, in_sentence, in_paragraph = True, 0, 0
        while len(buffer) < size:
            word = bytearray(words[zipf(len(words))])
            if sentence_start:
                word[0] &= 0xDF
                sentence_start = False
            buffer += word
            in_sentence += 1
            if in_sentence > 4 and random.below(12) == 0:
                buffer += b"."
                in_sentence, sentence_start, in_paragraph = 0, True, in_paragraph + 1
                if in_paragraph > 3 and random.below(5) == 0:
                    buffer += b"\n\n"
                    in_paragraph = 0
                else:
                    buffer += b" "
            elif random.below(14) == 0:
                buffer += b", "
            else:
                buffer += b" "
        return bytes(buffer[:size])

    os.makedirs(directory, exist_ok=True)
    for index in range(count):
        with open(os.path.join(directory, "%05d" % index), "wb") as file:
            file.write(block(4096))


if __name__ == "__main__":
    main()
