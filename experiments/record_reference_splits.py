"""Record the reference ReQA splitter's sentence boundaries on SQuAD, as a test fixture.

The reference splitter is ``sb_sed.py`` of google/retrieval-qa-eval (not part of this
project). Point ``--reference`` at a checkout of that repository; the script imports it from
there, splits every paragraph of the given SQuAD files and writes, per file, its sha256 and
per paragraph a short digest of the context and the flat list of (start, end) offsets. Only
offsets and digests are written, no text from the data.

    python experiments/record_reference_splits.py --reference ../retrieval-qa-eval \\
        --squad ../shared/data/squad/dev-v1.1.json.gz ../shared/data/squad/train-v1.1.json.gz

``tests/data/test_splitter_reference.py`` compares ``retrieval_qa.data.splitter`` with it.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import subprocess
from pathlib import Path

from retrieval_qa.data.io import file_sha256, load_json

FIXTURE = Path(__file__).resolve().parents[1] / "tests/data/fixtures/reference_splits.json.gz"


def context_digest(context: str) -> str:
    return hashlib.sha1(context.encode("utf-8")).hexdigest()[:10]


def paragraphs(path: Path):
    for article in load_json(path)["data"]:
        for paragraph in article["paragraphs"]:
            yield paragraph["context"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True,
                        help="checkout of google/retrieval-qa-eval (holds sb_sed.py)")
    parser.add_argument("--squad", type=Path, nargs="+", required=True)
    parser.add_argument("--output", type=Path, default=FIXTURE)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("sb_sed", args.reference / "sb_sed.py")
    sb_sed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sb_sed)
    try:
        commit = subprocess.run(["git", "-C", str(args.reference), "rev-parse", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    record = {"reference": f"google/retrieval-qa-eval sb_sed.py @ {commit}", "files": {}}
    for path in args.squad:
        rows = []
        for context in paragraphs(path):
            flat = [x for span in sb_sed.infer_sentence_breaks(context) for x in span]
            rows.append([context_digest(context), flat])
        record["files"][path.name] = {"sha256": file_sha256(path), "paragraphs": rows}
        print(f"{path.name}: {len(rows)} paragraphs, "
              f"{sum(len(f) for _, f in rows) // 2} sentences")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.output, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(record, f, separators=(",", ":"))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
