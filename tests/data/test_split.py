from retrieval_qa.data.reqa import assemble_pool
from retrieval_qa.data.split import train_val_split
from retrieval_qa.data.types import Candidate, QAPair


def _pool(n=200):
    cands, pairs = [], []
    for i in range(n):
        ctx = f"paragraph {i // 4}"
        cands.append(Candidate(f"c{i}", f"answer {i}", ctx, f"p{i // 4}"))
        # answers shared by 3 questions, and questions asked twice, to create groups
        pairs.append(QAPair(f"question {i}", f"answer {i - i % 3}", ctx, f"q{i}", f"c{i}"))
        if i % 10 == 0:
            pairs.append(QAPair(f"question {i}", f"answer {i + 1}", ctx, f"q{i}b", f"c{i + 1}"))
    return assemble_pool("toy", "train", cands, pairs)


def test_split_is_deterministic_and_leak_free():
    pool = _pool()
    train, val = train_val_split(pool, 0.1, seed=3)
    train2, val2 = train_val_split(pool, 0.1, seed=3)
    assert train == train2 and val.pairs == val2.pairs
    assert len(train) + len(val.pairs) == len(pool.pairs)
    assert abs(len(val.pairs) - 0.1 * len(pool.pairs)) <= 5
    assert not {p.question for p in train} & {p.question for p in val.pairs}
    assert not {p.answer for p in train} & {p.answer for p in val.pairs}
    # every validation question has gold candidates in the validation pool
    assert all(val.gold) and len(val.questions) == len({p.question for p in val.pairs})


def test_split_changes_with_seed():
    pool = _pool()
    assert train_val_split(pool, 0.1, seed=0)[1].pairs != train_val_split(pool, 0.1, seed=1)[1].pairs
