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


def test_cfg_of_evaluate_belongs_to_pipeline_and_bad_keys_exit_2(capsys):
    assert main(["evaluate", "--cfg"], stdout=io.StringIO()) == 2
    assert "--cfg belong to --pipeline" in capsys.readouterr().err
    assert main(["evaluate", "--pipeline", "hybrid_rrf", "--cfg", "fusion.rrf_kk=3"],
                stdout=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "fusion.rrf_kk" in err and "Did you mean: 'rrf_k'" in err
