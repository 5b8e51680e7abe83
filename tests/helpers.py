"""Tiny hand-written datasets and file writers for tests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

TINY_SQUAD = {
    "version": "1.1",
    "data": [
        {"title": "Alpha", "paragraphs": [
            {"context": "Paris is the capital of France. It has the Eiffel Tower.\nBerlin is in Germany.",
             "qas": [
                 {"id": "q1", "question": "What is the capital of France?",
                  "answers": [{"answer_start": 0, "text": "Paris"}]},
                 {"id": "q2", "question": "What tower is in Paris?",
                  "answers": [{"answer_start": 43, "text": "Eiffel Tower"},
                              {"answer_start": 43, "text": "Eiffel"}]},
                 {"id": "q3", "question": "Where is Berlin?",
                  "answers": [{"answer_start": 70, "text": "Germany"}]},
             ]},
            {"context": "Berlin is in Germany. Munich is in Bavaria.",
             "qas": [
                 {"id": "q4", "question": "Where is Berlin?",
                  "answers": [{"answer_start": 13, "text": "Germany"}]},
                 {"id": "q5", "question": "Which state has Munich?",
                  "answers": [{"answer_start": 35, "text": "Bavaria"}]},
             ]},
        ]},
    ],
}


def write_json_gz(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(obj, f)
    return path


def write_jsonl_gz(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path
