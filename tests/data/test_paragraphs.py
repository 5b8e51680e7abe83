import pytest
from helpers import TINY_SQUAD

from retrieval_qa.data.paragraphs import build_paragraph_task, load_paragraph_task
from retrieval_qa.data.squad import parse_squad


def test_tiny_task_questions_point_at_their_paragraph():
    paragraphs, _ = parse_squad(TINY_SQUAD)
    task = build_paragraph_task(paragraphs, "dev")
    assert len(task.questions) == 5 and len(task.paragraphs) == 2
    assert task.gold == [0, 0, 0, 1, 1]
    assert task.question_ids == ["q1", "q2", "q3", "q4", "q5"]
    # the same question string asked of two paragraphs stays two questions
    assert task.questions[2] == task.questions[3]


def test_unknown_pool_is_an_error():
    with pytest.raises(ValueError, match="pool"):
        load_paragraph_task("test")


@pytest.mark.integration
def test_dev_file_counts_are_the_papers(shared_data):
    task = load_paragraph_task("dev", shared_data)
    assert len(task.questions) == 10570 and len(task.paragraphs) == 2067   # Table 1
    assert max(task.gold) == 2066 and len(task.source_sha256) == 64
