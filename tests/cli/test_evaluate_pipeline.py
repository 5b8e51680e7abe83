import io

from retrieval_qa.cli import main


def test_unknown_pipeline_is_one_error_line(capsys):
    assert main(["evaluate", "--pipeline", "nope"], stdout=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "hybrid_convex" in err and "fix:" in err


def test_pipeline_options_need_pipeline_and_exclude_model(capsys):
    assert main(["evaluate", "--from-run-files", "x"], stdout=io.StringIO()) == 2
    assert "--pipeline" in capsys.readouterr().err
    assert main(["evaluate", "--pipeline", "hybrid_rrf", "--model", "bm25"],
                stdout=io.StringIO()) == 2
    assert "--model" in capsys.readouterr().err
