"""Writes gpt2_pretokenizer_splits.json: how GPT-2's pre-tokenisation pattern
splits a set of strings, as Python's `regex` module (which transformers'
GPT2Tokenizer uses) finds them. test_gpt2_tokenizer checks glimpse's
hand-written pre-tokeniser against this file. Run: python3 gpt2_pretokenizer_splits.py
"""
import json
import random

import regex

PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

CHOSEN = [
    "Hello world", " Hello world", "Hello  world", "Hello   world  ", "   leading", "trailing   ",
    "it's I'm you're we've he'll she'd don't", "IT'S I'M DON'T", "'s's 'sfoo ''s", "rock 'n' roll", "quote: 'word'",
    "tab\tand\ttabs\t\tdouble", "new\nline\n\nparagraph\n", "crlf\r\nline", " \n ", "\n", " ",
    "a \u00a0b\u3000c\u2003d", "\u00a0\u00a0x", "x\u0085y\u2028z",
    "numbers 123 4.56 7,890 +1 -2", "\u0663\u0664 \u2166 \u00bd\u00b2", "abc123def", "1st 2nd",
    "!!! ?! ... --- ***", "a.b,c;d:e", "(parens) [brackets] {braces}", "$100 #tag @user 50%",
    "caf\u00e9 cafe\u0301", "na\u0308ive \u1e9b\u0323", "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627",
    "\u4e2d\u6587\u5b57 \u65e5\u672c\u8a9e\u3067\u3059\u3002", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "emoji \U0001f642 \U0001f44d\U0001f3fd family \U0001f468\u200d\U0001f469\u200d\U0001f467 flags \U0001f1eb\U0001f1f7",
    "\u00df\u01c5\u02b0\u3005 \U0001d400\U0001d401", "\u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430",
    "zero\u200bwidth \ufeffbom", "ctl\x01\x1c\x1fsep", "\x7fdel", "\u2019curly\u2019s \u201cquotes\u201d",
    "mixed\t \n\t end", "a  \tb", "x \ty", "end with space ", "  ", "\t\n",
]

# characters whose classes (letter, number, White_Space, other) have not changed
# since Unicode 14, mixed at random
PIECES = list("aZ\u00e9'srtvemld") + [" "] * 6 + [
    "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u1680", "\u2003", "\u2028", "\u3000",
    "\u200b", "\ufeff", "1", "\u0663", "\u216b", "\u00bd", "\u00b2", "!", ".", "-", "\u2019", "\u0301", "\u0345",
    "\u064b", "\u4e2d", "\U0001f642", "\U0001f3fd", "\u200d", "\u00df", "\u01c5", "\u02b0", "\u3005",
    "\U0001d400", "\x7f", "\u20ac", "\ufffd", "'s", "'ll", "'re",
]


def main():
    pattern = regex.compile(PATTERN)
    generator = random.Random(17)
    texts = CHOSEN + ["".join(generator.choice(PIECES) for _ in range(generator.randint(1, 16))) for _ in range(300)]
    cases = []
    for text in texts:
        pieces = pattern.findall(text)
        assert "".join(pieces) == text
        cases.append({"text": text, "pieces": pieces})
    header = {"produced_by": "gpt2_pretokenizer_splits.py with Python's regex module " + regex.__version__
              + ", not by glimpse", "pattern": PATTERN}
    with open("gpt2_pretokenizer_splits.json", "w") as out:  # one case a line
        out.write(json.dumps(header)[:-1] + ', "cases": [\n')
        out.write(",\n".join(json.dumps(case) for case in cases))
        out.write("\n]}\n")

if __name__ == "__main__":
    main()
