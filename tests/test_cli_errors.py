"""The CLI's error policy: bad input (ConfigError, FileNotFoundError, PermissionError) is one line on stderr and
exit 2; anything else is a bug and shows its traceback (exit 1). Results do not depend on the thread count."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ("boundary", "dynamics", "dynamics_checks", "fig2", "fig2_ablations", "gates", "multiclass", "regression")  # the experiments with a `tiny` preset


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _python(code: str):
    return subprocess.run([sys.executable, "-c", code], env=_env(), cwd=ROOT, capture_output=True, text=True)


def _one_line(r, message: str):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("python -m mambaicl: error: ") and message in lines[0], lines


def test_an_unwritable_out_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, "-m", "mambaicl", "reproduce", "fig2", "--out", "/proc/x"], env=_env(),
                       cwd=ROOT, capture_output=True, text=True)
    _one_line(r, "--out /proc/x cannot be created")


@pytest.mark.parametrize("args, message", [
    (["--threads", "0"], "--threads must be an integer in [1, inf]; got 0"),
    (["--device", "tpu"], "--device must be one of"),
    (["--preset", "huge"], "unknown preset 'huge' for fig2"),
])
def test_bad_options_are_config_errors(args, message, capsys):
    from mambaicl.__main__ import main

    assert main(["reproduce", "fig2", "--out", "/tmp/never-written", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_an_internal_error_shows_its_traceback_and_exits_1(tmp_path):
    """A bug (any exception but the three of bad input) must not look like a user error."""
    code = ("import sys\n"
            "import mambaicl.experiments.fig2 as fig2\n"
            "from mambaicl.__main__ import main\n"
            "def boom(*a, **k):\n    raise RuntimeError('boom inside')\n"
            "fig2.run = boom\n"
            f"sys.exit(main(['reproduce', 'fig2', '--preset', 'tiny', '--out', {str(tmp_path / 'o')!r}, '--quiet']))\n")
    r = _python(code)
    assert r.returncode == 1, r.stderr
    assert "Traceback (most recent call last)" in r.stderr and "in boom" in r.stderr
    assert "RuntimeError: boom inside" in r.stderr and "python -m mambaicl: error" not in r.stderr


@pytest.mark.parametrize("exc", [ValueError("an internal ValueError"), OSError(5, "Input/output error"),
                                 FloatingPointError("diverged"), KeyError("k")])
def test_internal_errors_are_not_caught(exc, tmp_path, monkeypatch):
    """ValueError, OSError, ... raised inside an experiment propagate (the subprocess test shows the traceback)."""
    import mambaicl.experiments.fig2 as fig2
    from mambaicl.__main__ import main

    def boom(*a, **k):
        raise exc

    monkeypatch.setattr(fig2, "run", boom)
    with pytest.raises(type(exc)) as raised:
        main(["reproduce", "fig2", "--preset", "tiny", "--out", str(tmp_path / "o"), "--quiet"])
    assert raised.value is exc  # the experiment's own exception, unchanged
    assert not (tmp_path / "o" / "results.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("path", ["native", "mkl-avx2"])
@pytest.mark.parametrize("name", list(TINY))
def test_tiny_presets_give_the_same_bytes_on_one_and_two_threads(name, path, tmp_path):
    """Every `tiny` preset through the CLI with --threads 1 and --threads 2: identical results.json bytes, on MKL's
    native code path and on its AVX2 branch (the one AMD CPUs take), where a matrix product split over two threads
    rounds differently (the CLI keeps MKL's products on one thread: mambaicl.device.set_threads)."""
    env = _env() if path == "native" else dict(_env(), MKL_CBWR="AVX2")
    procs = {}
    for threads in (1, 2):  # two runs at once: the machine's two cores
        out = tmp_path / f"{name}-{threads}"
        procs[threads] = (out, subprocess.Popen(
            [sys.executable, "-m", "mambaicl", "reproduce", name, "--preset", "tiny", "--threads", str(threads),
             "--out", str(out), "--quiet"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True))
    for threads in (1, 2):
        out, p = procs[threads]
        assert p.wait() == 0, p.stderr.read()
    one, two = ((procs[t][0] / "results.json").read_bytes() for t in (1, 2))
    assert one == two, name
