"""experiments/device_pack.py: the data files and the model survive the pack and the restore
(the data exactly, the weights as fp16 cast back to fp32), a part already packed is not packed
again, the wheels are asked of pip with the GPU image's Python and platforms at the versions
installed here (no network: pip is replaced), the size check adds up what travels and fails
above the limit, and the device-side scripts are valid shell."""

from __future__ import annotations

import gzip
import subprocess
from importlib import metadata

import pytest
from device_helpers import make_world, package_init
from safetensors.torch import load_file

from experiments import device_pack as P


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("pack-world"))


def test_data_round_trip_and_cache(world, tmp_path):
    pack = tmp_path / "pack"
    assert P.pack_data(world["data"], pack) == list(P.DATA_FILES)
    assert P.pack_data(world["data"], pack) == []              # unchanged: not packed again
    restored = P.restore_data(pack, tmp_path / "data")
    assert len(restored) == len(P.DATA_FILES)
    for rel in P.DATA_FILES:
        plain = tmp_path / "data" / rel.removesuffix(".gz")
        assert plain.read_bytes() == gzip.decompress((world["data"] / rel).read_bytes())


def test_the_checklist_reads_the_restored_data(world, tmp_path):
    from retrieval_qa.data import load_pool

    P.pack_data(world["data"], tmp_path / "pack")
    P.restore_data(tmp_path / "pack", tmp_path / "data")
    for dataset, pool in (("reqa_squad", "dev"), ("multireqa_squad", "test")):
        got, _ = load_pool(dataset, pool, tmp_path / "data", use_cache=False)
        want, _ = load_pool(dataset, pool, world["data"], use_cache=False)
        assert got.questions == want.questions and got.candidates == want.candidates


def test_missing_data_file_names_it(tmp_path):
    with pytest.raises(SystemExit, match="squad/train-v1.1.json.gz: missing"):
        P.pack_data(tmp_path, tmp_path / "pack")


def test_model_round_trip_is_fp16_cast_back(world, tmp_path):
    original = load_file(world["minilm"] / P.WEIGHTS)
    restored = load_file(world["model"] / P.WEIGHTS)
    assert restored.keys() == original.keys()
    for name, tensor in original.items():
        back = restored[name]
        assert back.dtype == tensor.dtype and back.shape == tensor.shape
        expected = tensor.half().float() if tensor.is_floating_point() else tensor
        assert back.equal(expected), name
    assert (world["model"] / "tokenizer.json").is_file()
    assert (world["site"] / P.MODEL_PACKAGE / "__init__.py").read_text() == \
        package_init().read_text()
    assert not P.pack_model(world["minilm"], package_init(), world["pack"])  # cached


def test_wheels_asked_of_pip_for_the_image(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(P.subprocess, "run", fake_run)
    (tmp_path / "wheels").mkdir()
    version = metadata.version("omegaconf")
    (tmp_path / "wheels" / f"omegaconf-{version}-py3-none-any.whl").write_bytes(b"")
    fetched = P.download_wheels(tmp_path, ("omegaconf", "bm25s"))
    assert fetched == [f"bm25s=={metadata.version('bm25s')}"]   # omegaconf: already there
    [cmd] = calls
    assert cmd[cmd.index("--python-version") + 1] == "3.12" and "--no-deps" in cmd
    assert "manylinux2014_x86_64" in cmd and cmd[-1] == fetched[0]
    monkeypatch.setattr(P.subprocess, "run",
                        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1))
    with pytest.raises(SystemExit, match="pip download bm25s"):
        P.download_wheels(tmp_path, ("bm25s",))


def test_size_check_adds_up_what_travels(tmp_path, capsys):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "blob").write_bytes(b"x" * 2**20)
    report = P.check_size(pack)
    assert report["pack_mib"] == 1.0 and report["tracked_mib"] > 1
    assert report["total_mib"] == pytest.approx(sum(report[f"{k}_mib"] for k in (
        "tracked", "untracked", "pack", "carry")), abs=0.02)
    assert "travels:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        P.check_size(pack, limit=2**20)
    assert stop.value.code == 2
    assert "too large by" in capsys.readouterr().err


def test_pack_without_network_then_restore(world, tmp_path, capsys):
    pack = tmp_path / ".device"
    assert P.main(["pack", "--pack", str(pack), "--data-dir", str(world["data"]),
                   "--model-dir", str(world["minilm"]), "--no-download"]) == 0
    assert {p.name for p in pack.glob("*.sh")} == {"start.sh", "poll.sh", "env.sh"}
    assert "travels:" in capsys.readouterr().out
    assert P.main(["restore", "--pack", str(pack), "--site", str(tmp_path / "site"),
                   "--data-dir", str(tmp_path / "data")]) == 0
    assert (tmp_path / "site" / P.MODEL_PACKAGE / "model" / P.WEIGHTS).is_file()
    assert (tmp_path / "data/squad/dev-v1.1.json").is_file()


@pytest.mark.parametrize("script", ["start.sh", "poll.sh", "env.sh"])
def test_device_scripts_are_valid_shell(script):
    assert subprocess.run(["bash", "-n", str(P.SCRIPTS / script)]).returncode == 0


def test_size_counts_whole_blocks(tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "one").write_bytes(b"x")
    (pack / "two").write_bytes(b"x" * (P.BLOCK + 1))
    assert P.travelling_bytes(pack)["pack"] == 3 * P.BLOCK
    (pack / "carry" / "x").mkdir(parents=True)     # carry sets: counted, apart
    (pack / "carry" / "x" / "carry-x.part01").write_bytes(b"x" * 10)
    sizes = P.travelling_bytes(pack)
    assert sizes["pack"] == 3 * P.BLOCK and sizes["carry"] == P.BLOCK


def test_slim_leaves_records_and_notebooks_out_then_puts_them_back(tmp_path, capsys):
    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True,
                              text=True).stdout

    git("init", "-q")
    files = ["results/a/records/q.jsonl.gz", "results/a/README.md", "notebooks/n.ipynb",
             "src.py"]
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    P.slim(True, root=tmp_path)
    assert [n for n in files if (tmp_path / n).exists()] == ["results/a/README.md", "src.py"]
    assert git("status", "--porcelain") == ""
    assert "device-unslim" in capsys.readouterr().out
    P.slim(False, root=tmp_path)
    assert all((tmp_path / n).read_text() == n for n in files)
    assert git("status", "--porcelain") == ""
