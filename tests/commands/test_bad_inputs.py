"""Every bad input is refused the same way: exit code 2, one line on stderr naming the value,
no traceback, and the file system exactly as it was (a run directory unchanged, or absent).

Each case prepares what it needs in a fresh folder (a user .npz, a damaged copy of one small
finished run, ...) and returns the command line; the test snapshots every file under that
folder and under the shared run before and after ``bnnkit.cli.main``.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bnnkit.cli import main

PROBLEM = ["--dataset", "yacht_0", "--model", "linear", "--noise-std", "0.35"]
HMC = [
    "hmc",
    *PROBLEM,
    "--step-size",
    "1e-3",
    "--trajectory-len",
    "2e-3",
    "--num-iterations",
    "4",
    "--num-burn-in",
    "1",
    "--num-chains",
    "2",
    "--no-progress",
    "--no-evaluate",
]
SGD = [
    "sgd",
    *PROBLEM,
    "--init-step-size",
    "1e-3",
    "--num-epochs",
    "1",
    "--batch-size",
    "32",
    "--no-progress",
    "--no-evaluate",
]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """One small finished HMC run (kept samples 1, 2, 3), shared and never modified."""
    path = tmp_path_factory.mktemp("shared") / "run"
    assert main([*HMC, "--dir", str(path)]) == 0
    return path


def with_flag(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with ``flag`` set to ``value`` (replacing it when present)."""
    argv = list(argv)
    if flag in argv:
        i = argv.index(flag)
        del argv[i : i + 2]
    return [*argv, f"{flag}={value}"]  # '=' so that '-1' is a value, not a flag


def hmc_flag(flag: str, value: str) -> Callable:
    return lambda tmp, run: [*with_flag(HMC, flag, value), "--dir", str(tmp / "new")]


def sgd_flag(flag: str, value: str) -> Callable:
    return lambda tmp, run: [*with_flag(SGD, flag, value), "--dir", str(tmp / "new")]


def arrays(classification: bool = False, **changes) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if classification:
        y_train, y_test = np.arange(20) % 3, np.arange(6) % 3
    else:
        y_train, y_test = rng.normal(size=20), rng.normal(size=6)
    out = {
        "x_train": rng.normal(size=(20, 3)),
        "y_train": y_train,
        "x_test": rng.normal(size=(6, 3)),
        "y_test": y_test,
    }
    out.update(changes)
    return {k: v for k, v in out.items() if v is not None}


def npz_case(write: Callable[[Path], None]) -> Callable:
    def case(tmp, run):
        path = tmp / "data.npz"
        write(path)
        argv = [*HMC, "--dir", str(tmp / "new")]
        argv[argv.index("yacht_0")] = str(path)
        return argv

    return case


def savez(**kwargs) -> Callable[[Path], None]:
    return lambda path: np.savez(path, **arrays(**kwargs))


def write_bytes(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data)


def npy_renamed(path: Path) -> None:
    with open(path, "wb") as f:
        np.save(f, np.zeros((4, 3)))


def truncated_npz(path: Path) -> None:
    np.savez(path, **arrays())
    path.write_bytes(path.read_bytes()[:300])


def object_npz(path: Path) -> None:
    values = arrays()
    values["x_train"] = np.array([{"a": 1}] * 20, dtype=object)
    np.savez(path, **values)


def copy_run(run: Path, tmp: Path) -> Path:
    return Path(shutil.copytree(run, tmp / "copy"))


def damaged(change: Callable[[Path], None], command: str = "evaluate") -> Callable:
    """A copy of the finished run, changed, then given to ``command``."""

    def case(tmp, run):
        copy = copy_run(run, tmp)
        change(copy)
        if command == "evaluate":
            return ["evaluate", str(copy)]
        if command == "samples":
            return ["samples", str(copy), "--out", str(tmp / "out.npz")]
        if command == "verify":
            return ["verify", str(copy)]
        return [*with_flag(HMC, "--num-iterations", "6"), "--dir", str(copy), "--resume"]

    return case


def truncate(name: str) -> Callable[[Path], None]:
    def change(copy):
        data = (copy / name).read_bytes()
        (copy / name).write_bytes(data[: len(data) // 2])

    return change


def delete(name: str) -> Callable[[Path], None]:
    return lambda copy: (copy / name).unlink()


def replace_arrays(name: str, values: dict) -> Callable[[Path], None]:
    return lambda copy: np.savez(copy / name, **values)


def edit_record(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    def change(copy):
        record = json.loads((copy / "run.json").read_text())
        new = edit(record)
        (copy / "run.json").write_text(json.dumps(record if new is None else new))

    return change


def set_in(section: str, key: str, value) -> Callable[[dict], None]:
    return lambda record: record[section].__setitem__(key, value)


def not_writable(folder_of: Callable[[Path, Path], Path], argv_of: Callable) -> Callable:
    """The folder is made unwritable for this user (os.access says so: the tests may run as
    root, for whom permissions do not apply)."""

    def case(tmp, run, monkeypatch):
        folder = os.path.abspath(folder_of(tmp, run))
        real = os.access
        monkeypatch.setattr(
            os,
            "access",
            lambda p, mode, *a, **k: (
                False if os.path.abspath(p) == folder and mode & os.W_OK else real(p, mode, *a, **k)
            ),
        )
        return argv_of(tmp, run)

    case.needs_monkeypatch = True
    return case


def a_file(tmp: Path) -> Path:
    (tmp / "f.txt").write_text("not a folder")
    return tmp / "f.txt"


def a_folder_with_a_file(tmp: Path) -> Path:
    (tmp / "mine").mkdir()
    (tmp / "mine" / "notes.txt").write_text("keep me")
    return tmp / "mine"


def unfinished(copy: Path) -> None:
    record = json.loads((copy / "run.json").read_text())
    record["status"] = "running"  # not a setting: the digest still matches
    (copy / "run.json").write_text(json.dumps(record))


CASES: dict[str, tuple[Callable, str]] = {
    # Numbers: finite and in range, refused before anything is built.
    "seed too large for an int": (hmc_flag("--seed", "99999999999999999999"), "--seed"),
    "seed negative": (hmc_flag("--seed", "-1"), "allowed: 0..4294967295"),
    "seed 2^32 wraps to 0": (hmc_flag("--seed", "4294967296"), "allowed: 0..4294967295"),
    "seed not a number": (hmc_flag("--seed", "abc"), "--seed"),
    "temperature inf": (hmc_flag("--temperature", "inf"), "--temperature inf must be a finite"),
    "temperature nan": (hmc_flag("--temperature", "nan"), "--temperature nan must be a finite"),
    "temperature 0": (hmc_flag("--temperature", "0"), "temperature 0.0 must be > 0"),
    "noise std inf": (hmc_flag("--noise-std", "inf"), "--noise-std inf must be a finite"),
    "noise std nan": (hmc_flag("--noise-std", "nan"), "--noise-std nan must be a finite"),
    "noise std 0": (hmc_flag("--noise-std", "0"), "noise std 0.0 must be > 0"),
    "weight decay nan": (hmc_flag("--weight-decay", "nan"), "--weight-decay nan"),
    "weight decay negative": (hmc_flag("--weight-decay", "-1"), "weight decay -1.0"),
    "step size inf": (hmc_flag("--step-size", "inf"), "--step-size inf"),
    "step size 0": (hmc_flag("--step-size", "0"), "--step-size 0.0 out of range; allowed: > 0"),
    "trajectory nan": (hmc_flag("--trajectory-len", "nan"), "--trajectory-len nan"),
    "iterations 0": (hmc_flag("--num-iterations", "0"), "--num-iterations 0 out of range"),
    "burn-in negative": (hmc_flag("--num-burn-in", "-1"), "burn-in -1"),
    "chains 0": (hmc_flag("--num-chains", "0"), "--num-chains 0 out of range"),
    "subset 0": (hmc_flag("--subset-train-to", "0"), "--subset-train-to 0 out of range"),
    "chunk size 0": (hmc_flag("--chunk-size", "0"), "--chunk-size 0 out of range"),
    "target accept 1.5": (hmc_flag("--target-accept-rate", "1.5"), "--target-accept-rate 1.5"),
    "divergence threshold inf": (
        hmc_flag("--divergence-threshold", "inf"),
        "--divergence-threshold inf",
    ),
    "sgd step size inf": (sgd_flag("--init-step-size", "inf"), "--init-step-size inf"),
    "sgd batch size 0": (sgd_flag("--batch-size", "0"), "--batch-size 0"),
    "sgd epochs 0": (sgd_flag("--num-epochs", "0"), "--num-epochs 0"),
    "sgd batch larger than data": (sgd_flag("--batch-size", "100000"), "--batch-size 100000"),
    # Augmentation crops and flips images of minibatches: not tabular data, not full batches.
    "sgd --augment on tabular data": (
        lambda tmp, run: [*SGD, "--augment", "--dir", str(tmp / "new")],
        "'yacht_0' has inputs of shape N x 6",
    ),
    "hmc --augment (full batch)": (
        lambda tmp, run: [*HMC, "--augment", "--dir", str(tmp / "new")],
        "unrecognized arguments: --augment",
    ),
    # User .npz files.
    "npz 0 bytes": (npz_case(write_bytes(b"")), "not a readable .npz"),
    "npz is an .npy renamed": (npz_case(npy_renamed), "single .npy array"),
    "npz truncated": (npz_case(truncated_npz), "not a readable .npz"),
    "npz with an object array": (npz_case(object_npz), "not a readable .npz"),
    "npz 0-d x_train": (npz_case(savez(x_train=np.array(1.0))), "x_train is a single number"),
    "npz 0 training rows": (
        npz_case(savez(x_train=np.zeros((0, 3)), y_train=np.zeros(0))),
        "x_train has 0 rows",
    ),
    "npz empty test set": (
        npz_case(savez(x_test=np.zeros((0, 3)), y_test=np.zeros(0))),
        "x_test has 0 rows",
    ),
    "npz label 2^32+1": (
        npz_case(
            savez(classification=True, y_train=np.r_[np.arange(19) % 3, 2**32 + 1].astype(np.int64))
        ),
        "class label 4294967297",
    ),
    "npz test label outside the training classes": (
        npz_case(savez(classification=True, y_test=np.array([0, 1, 2, 3, 0, 1]))),
        "y_test holds class 3",
    ),
    "npz negative label": (
        npz_case(savez(classification=True, y_train=np.r_[np.arange(19) % 3, -1])),
        "class label -1 is negative",
    ),
    "npz integer train, real test targets": (
        npz_case(savez(classification=True, y_test=np.zeros(6))),
        "y_train has dtype int64 but y_test",
    ),
    "npz complex inputs": (
        npz_case(savez(x_train=np.ones((20, 3), complex))),
        "x_train has dtype complex128",
    ),
    "npz string inputs": (npz_case(savez(x_train=np.full((20, 3), "a"))), "x_train has dtype <U1"),
    "npz without y_test": (npz_case(savez(y_test=None)), "lacks y_test"),
    "npz rows differ": (npz_case(savez(y_train=np.zeros(19))), "x_train has 20 rows but"),
    "npz 2-d targets": (npz_case(savez(y_train=np.zeros((20, 3)))), "y_train has shape"),
    "npz NaN input": (npz_case(savez(x_test=np.full((6, 3), np.nan))), "x_test holds 18 NaN"),
    "npz feature shapes differ": (npz_case(savez(x_test=np.zeros((6, 4)))), "x_test rows have"),
    "npz does not exist": (
        lambda tmp, run: [
            *with_flag(HMC, "--dataset", str(tmp / "no.npz")),
            "--dir",
            str(tmp / "new"),
        ],
        "does not exist",
    ),
    # Paths.
    "dir empty string": (lambda tmp, run: [*HMC, "--dir", ""], "--dir '' names no directory"),
    "dir under a file": (
        lambda tmp, run: [*HMC, "--dir", str(a_file(tmp) / "sub")],
        "is a file, not a folder",
    ),
    "dir is a file": (lambda tmp, run: [*HMC, "--dir", str(a_file(tmp))], "is a file"),
    "dir parent not writable": (
        not_writable(lambda tmp, run: tmp, lambda tmp, run: [*HMC, "--dir", str(tmp / "new")]),
        "does not allow this user to write",
    ),
    "dir holds other files": (
        lambda tmp, run: [*HMC, "--dir", str(a_folder_with_a_file(tmp))],
        "is not empty",
    ),
    "overwrite a folder that is no run": (
        lambda tmp, run: [*HMC, "--dir", str(a_folder_with_a_file(tmp)), "--overwrite"],
        "not a bnnkit run",
    ),
    "existing run without a flag": (
        lambda tmp, run: [*HMC, "--dir", str(copy_run(run, tmp))],
        "is not empty; pass --resume",
    ),
    "resume nothing": (
        lambda tmp, run: [*HMC, "--dir", str(tmp / "new"), "--resume"],
        "nothing to resume",
    ),
    "resume and overwrite": (
        lambda tmp, run: [*HMC, "--dir", str(copy_run(run, tmp)), "--resume", "--overwrite"],
        "--resume and --overwrite exclude each other",
    ),
    "resume with fewer iterations": (
        lambda tmp, run: [
            *with_flag(HMC, "--num-iterations", "3"),
            "--dir",
            str(copy_run(run, tmp)),
            "--resume",
        ],
        "has done 4 iterations, more than the 3",
    ),
    "resume with another step size": (
        lambda tmp, run: [
            *with_flag(HMC, "--step-size", "2e-3"),
            "--dir",
            str(copy_run(run, tmp)),
            "--resume",
        ],
        "step_size was 0.001",
    ),
    "resume a run dir that is not writable": (
        not_writable(
            lambda tmp, run: tmp / "copy",
            lambda tmp, run: [*HMC, "--dir", str(copy_run(run, tmp)), "--resume"],
        ),
        "cannot be written",
    ),
    "samples out is a directory": (
        lambda tmp, run: ["samples", str(run), "--out", str(tmp)],
        "is a directory",
    ),
    "samples out empty": (lambda tmp, run: ["samples", str(run), "--out", ""], "--out ''"),
    "samples out folder missing": (
        lambda tmp, run: ["samples", str(run), "--out", str(tmp / "no" / "x.npz")],
        "does not exist",
    ),
    "samples out not writable": (
        not_writable(
            lambda tmp, run: tmp,
            lambda tmp, run: ["samples", str(run), "--out", str(tmp / "x.npz")],
        ),
        "cannot write the samples",
    ),
    "evaluate a run that is not writable": (
        not_writable(
            lambda tmp, run: tmp / "copy", lambda tmp, run: ["evaluate", str(copy_run(run, tmp))]
        ),
        "cannot write the evaluation",
    ),
    "evaluate nothing": (
        lambda tmp, run: ["evaluate", str(tmp / "nothere")],
        "not a bnnkit run directory",
    ),
    # Other runs named by a flag: checked before anything is trained.
    "reference does not exist": (
        lambda tmp, run: [*HMC, "--dir", str(tmp / "new"), "--reference", str(tmp / "nothere")],
        "--reference",
    ),
    "reference on another dataset": (
        lambda tmp, run: [
            *with_flag(HMC, "--dataset", "yacht_1"),
            "--dir",
            str(tmp / "new"),
            "--reference",
            str(run),
        ],
        "is a run on dataset 'yacht_0'",
    ),
    "reference damaged": (
        lambda tmp, run: [
            *HMC,
            "--dir",
            str(tmp / "new"),
            "--reference",
            str(damaged_copy(tmp, run)),
        ],
        "sample_0000002.npz' is damaged",
    ),
    "evaluate reference does not exist": (
        lambda tmp, run: ["evaluate", str(run), "--reference", str(tmp / "nothere")],
        "not a bnnkit run",
    ),
    "init checkpoint does not exist": (
        lambda tmp, run: [
            *HMC,
            "--dir",
            str(tmp / "new"),
            "--init-checkpoint",
            str(tmp / "nothere"),
        ],
        "--init-checkpoint",
    ),
    "init checkpoint sample out of range": (
        lambda tmp, run: [*HMC, "--dir", str(tmp / "new"), "--init-checkpoint", f"{run}:99"],
        "sample 99 out of range",
    ),
    "init checkpoint unfinished": (
        lambda tmp, run: [
            *HMC,
            "--dir",
            str(tmp / "new"),
            "--init-checkpoint",
            str(changed(tmp, run, unfinished)),
        ],
        "is unfinished",
    ),
    "init checkpoint of another model": (
        lambda tmp, run: [
            *with_flag(HMC, "--model", "mlp_regression_small"),
            "--dir",
            str(tmp / "new"),
            "--init-checkpoint",
            str(run),
        ],
        "is for model 'linear'",
    ),
    "init checkpoint damaged": (
        lambda tmp, run: [
            *HMC,
            "--dir",
            str(tmp / "new"),
            "--init-checkpoint",
            str(damaged_copy(tmp, run)),
        ],
        "is damaged",
    ),
    "mean init run does not exist": (
        lambda tmp, run: [
            "vi",
            *PROBLEM,
            "--init-step-size",
            "1e-3",
            "--num-epochs",
            "1",
            "--batch-size",
            "32",
            "--dir",
            str(tmp / "new"),
            "--mean-init-run",
            str(tmp / "nothere"),
        ],
        "does not exist",
    ),
    "map run does not exist": (
        lambda tmp, run: ["laplace", "--map-run", str(tmp / "nothere"), "--dir", str(tmp / "new")],
        "--map-run",
    ),
    "map run of a sampler": (
        lambda tmp, run: ["laplace", "--map-run", str(run), "--dir", str(tmp / "new")],
        "is a 'hmc' run; allowed",
    ),
    # Damaged run directories.
    "truncated sample, evaluate": (
        damaged(truncate("samples/sample_0000002.npz")),
        "sample_0000002.npz' is damaged",
    ),
    "truncated sample, resume": (
        damaged(truncate("samples/sample_0000002.npz"), "resume"),
        "cannot resume: '",
    ),
    "truncated sample, samples": (
        damaged(truncate("samples/sample_0000002.npz"), "samples"),
        "sample_0000002.npz' is damaged",
    ),
    "truncated state, resume": (damaged(truncate("state.npz"), "resume"), "state.npz' is dam"),
    "deleted sample, evaluate": (
        damaged(delete("samples/sample_0000003.npz")),
        "sample_0000003.npz' is missing",
    ),
    "deleted sample, resume": (
        damaged(delete("samples/sample_0000003.npz"), "resume"),
        "sample_0000003.npz' is missing",
    ),
    "deleted state, resume": (damaged(delete("state.npz"), "resume"), "state.npz' is missing"),
    "wrong-shape sample, evaluate": (
        damaged(
            replace_arrays(
                "samples/sample_0000001.npz",
                {
                    "__kind__": np.asarray("samples"),
                    "__meta__": np.asarray("[{}]"),
                    "params/Dense_0/kernel": np.zeros((2, 1, 5, 1)),
                },
            )
        ),
        "sample_0000001.npz' is damaged or was edited",
    ),
    "wrong-shape sample, resume": (
        damaged(replace_arrays("samples/sample_0000001.npz", {"w": np.zeros(3)}), "resume"),
        "sample_0000001.npz'",
    ),
    "object-array sample, evaluate": (
        damaged(replace_arrays("samples/sample_0000001.npz", {"w": np.array([{}], dtype=object)})),
        "sample_0000001.npz' is damaged",
    ),
    "object-array state, resume": (
        damaged(replace_arrays("state.npz", {"w": np.array([{}], dtype=object)}), "resume"),
        "state.npz' is damaged",
    ),
    "unrecorded extra sample, evaluate": (
        damaged(
            lambda copy: shutil.copy(
                copy / "samples/sample_0000001.npz", copy / "samples/sample_0000000.npz"
            )
        ),
        "sample_0000000.npz' is not in the manifest",
    ),
    "manifest deleted, evaluate": (damaged(delete("manifest.jsonl")), "manifest.jsonl' is miss"),
    "manifest edited, evaluate": (
        damaged(
            lambda copy: (copy / "manifest.jsonl").write_text(
                "garbage\n" + (copy / "manifest.jsonl").read_text()
            )
        ),
        "manifest.jsonl'",
    ),
    "run.json invalid, evaluate": (
        damaged(lambda copy: (copy / "run.json").write_text("{")),
        "run.json' is damaged: not valid JSON",
    ),
    "run.json a list, evaluate": (damaged(edit_record(lambda record: [])), "run.json' is damaged"),
    "run.json without problem, evaluate": (
        damaged(edit_record(lambda record: record.pop("problem") and None)),
        "'problem' is missing",
    ),
    "run.json noise std edited, evaluate": (
        damaged(edit_record(set_in("problem", "noise_std", 0.5))),
        "run.json' was edited",
    ),
    "run.json weight decay 'nan', evaluate": (
        damaged(edit_record(set_in("problem", "weight_decay", "nan"))),
        "run.json' was edited",
    ),
    "run.json dataset edited, evaluate": (
        damaged(edit_record(set_in("problem", "dataset", "yacht_1"))),
        "run.json' was edited",
    ),
    "run.json invalid, resume": (
        damaged(lambda copy: (copy / "run.json").write_text("["), "resume"),
        "run.json' is damaged",
    ),
    "run.json edited, resume": (
        damaged(edit_record(set_in("method_config", "num_burn_in", 2)), "resume"),
        "run.json' was edited",
    ),
    "verify a damaged run": (
        damaged(truncate("samples/sample_0000002.npz"), "verify"),
        "1 damaged, missing or unrecorded file(s)",
    ),
}


# --- The classes added once the matrix above passed: each class, not only its examples. ----


def in_run(argv_of: Callable[[Path, Path], list[str]]) -> Callable:
    """A command whose output path lies inside a copy of the finished run."""
    return lambda tmp, run: argv_of(tmp, copy_run(run, tmp))


def vi_flag(flag: str, value: str) -> Callable:
    vi = [
        "vi",
        *PROBLEM,
        "--init-step-size",
        "1e-3",
        "--num-epochs",
        "1",
        "--batch-size",
        "32",
        "--no-progress",
        "--no-evaluate",
    ]
    return lambda tmp, run: [*with_flag(vi, flag, value), "--dir", str(tmp / "new")]


def method_flag(method: list[str], flag: str, value: str) -> Callable:
    return lambda tmp, run: [*with_flag(method, flag, value), "--dir", str(tmp / "new")]


def resumed_with(flag: str, value: str) -> Callable:
    return lambda tmp, run: [
        *with_flag(HMC, flag, value),
        "--dir",
        str(copy_run(run, tmp)),
        "--resume",
    ]


def edited(*steps: Callable[[dict], object]) -> Callable[[dict], None]:
    def edit(record: dict) -> None:
        for step in steps:
            step(record)

    return edit


def set_layout(value) -> Callable[[dict], None]:
    return lambda record: record.__setitem__("layout", value)


def drop(key: str) -> Callable[[dict], None]:
    return lambda record: record.pop(key)


def deep_json(copy: Path) -> None:
    (copy / "run.json").write_text("[" * 100_000 + "]" * 100_000)


def lying_npy_header(path: Path) -> None:
    """An .npz whose x_train.npy header declares 3e11 float64 elements over a few bytes."""
    import zipfile

    np.savez(path, **{k: v for k, v in arrays().items() if k != "x_train"})
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
    header["shape"] = (300_000_000_000,)
    buffer = __import__("io").BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("x_train.npy", buffer.getvalue() + b"\0" * 48)


def nan_sample(copy: Path) -> None:
    """A kept sample holding NaN, recorded in the manifest as written (a run that diverged
    before runs were stopped for it)."""
    from bnnkit import storage
    from bnnkit.runs import manifest_lines

    name = "samples/sample_0000002.npz"
    values = storage.load_arrays(copy / name)
    key = next(k for k, v in values.items() if v.dtype.kind == "f")
    values[key] = np.full_like(values[key], np.nan)
    files = manifest_lines.Manifest(copy / manifest_lines.MANIFEST_FILE)
    lines = list(files.latest().values())
    written = storage.save_arrays(copy / name, values)
    files.rewrite(
        [
            manifest_lines.entry(name, written, unit=2) if line["file"] == name else line
            for line in lines
        ]
    )
    # As the run would have finished: its record names the manifest's new last line.
    from bnnkit.runs.directory import RunDir

    record = RunDir(copy).read_record()
    RunDir(copy).write_record({**record, manifest_lines.HEAD_KEY: files.head()[0]})


def toml_file(text: bytes | str) -> Callable[[Path], Path]:
    def write(tmp: Path) -> Path:
        path = tmp / "settings.toml"
        (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
        return path

    return write


def with_config(
    method: list[str],
    write: Callable[[Path], Path],
    flag: str = "--config",
    drop: str | None = None,
) -> Callable:
    def case(tmp, run):
        argv = list(method)
        if drop is not None:
            i = argv.index(drop)
            del argv[i : i + 2]
        return [*argv, flag, str(write(tmp)), "--dir", str(tmp / "new")]

    return case


def with_env(values: dict[str, str], argv_of: Callable) -> Callable:
    def case(tmp, run, monkeypatch):
        for key, value in values.items():
            monkeypatch.setenv(key, value)
        return argv_of(tmp, run)

    case.needs_monkeypatch = True
    return case


SLURM = {
    "SLURM_JOB_ID": "1",
    "SLURM_STEP_NODELIST": "node1",
    "SLURM_NTASKS": "2",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
}


def a_folder(path: Path) -> Path:
    path.mkdir()
    return path


def predictions_file(copy: Path) -> None:
    (copy / "predictions").write_text("not a folder")


CASES.update(
    {
        # Data safety: no --out, and no run, inside a run directory (its own files could be
        # replaced); a run directory whose record is from another layout, or not one at all.
        "samples out is the run's state": (
            in_run(lambda tmp, copy: ["samples", str(copy), "--out", str(copy / "state.npz")]),
            "is inside the run directory",
        ),
        "samples out is one of the run's samples": (
            in_run(
                lambda tmp, copy: [
                    "samples",
                    str(copy),
                    "--out",
                    str(copy / "samples" / "sample_0000001.npz"),
                ]
            ),
            "is inside the run directory",
        ),
        "samples out is a new file in the run": (
            in_run(lambda tmp, copy: ["samples", str(copy), "--out", str(copy / "export.npz")]),
            "is inside the run directory",
        ),
        "netcdf out inside the run": (
            in_run(
                lambda tmp, copy: [
                    "samples",
                    str(copy),
                    "--format",
                    "netcdf",
                    "--out",
                    str(copy / "run.nc"),
                ]
            ),
            "is inside the run directory",
        ),
        "surface out inside the run": (
            in_run(
                lambda tmp, copy: [
                    "surface",
                    str(copy),
                    str(copy),
                    str(copy),
                    "--out",
                    str(copy / "surface"),
                ]
            ),
            "is inside the run directory",
        ),
        "report out inside the run": (
            in_run(lambda tmp, copy: ["report", str(copy), "--out", str(copy / "report")]),
            "is inside the run directory",
        ),
        "prune out inside another run": (
            in_run(lambda tmp, copy: ["prune", str(copy), "--out", str(copy / "samples" / "p")]),
            "is inside the run directory",
        ),
        "datasets grid inside a run": (
            in_run(
                lambda tmp, copy: [
                    "datasets",
                    "--show-corruptions",
                    "cifar10",
                    "--out",
                    str(copy / "grid.png"),
                ]
            ),
            "is inside the run directory",
        ),
        "a new run inside a run": (
            in_run(lambda tmp, copy: [*HMC, "--dir", str(copy / "sub")]),
            "is inside the run directory",
        ),
        "a new run inside a run's samples": (
            in_run(lambda tmp, copy: [*HMC, "--dir", str(copy / "samples" / "x")]),
            "is inside the run directory",
        ),
        "run.json layout a string, evaluate": (
            damaged(edit_record(set_layout("3"))),
            'not a layout number: "3"',
        ),
        "run.json layout a string, verify": (
            damaged(edit_record(set_layout("3")), "verify"),
            "1 damaged",
        ),
        "run.json layout from the future, evaluate": (
            damaged(edit_record(set_layout(99))),
            "layout 99; allowed: the layouts",
        ),
        "run.json layout true, resume": (
            damaged(edit_record(set_layout(True)), "resume"),
            "not a layout number",
        ),
        "run.json older layout with an edit, evaluate": (
            damaged(edit_record(edited(set_layout(2), set_in("problem", "noise_std", 0.5)))),
            "run.json' was edited",
        ),
        "run.json older layout with an edit, verify": (
            damaged(
                edit_record(edited(set_layout(2), set_in("method_config", "step_size", 1.0))),
                "verify",
            ),
            "1 damaged",
        ),
        "run.json without layout or digest, edited": (
            damaged(
                edit_record(
                    edited(
                        drop("layout"),
                        drop("settings_sha256"),
                        drop("manifest"),
                        set_in("problem", "noise_std", 0.5),
                    )
                )
            ),
            "run.json' was edited",
        ),
        "run.json without layout, resume": (
            damaged(
                edit_record(edited(drop("layout"), set_in("method_config", "num_burn_in", 2))),
                "resume",
            ),
            "run.json' was edited",
        ),
        "run.json nested 100000 deep, evaluate": (damaged(deep_json), "nested too deeply"),
        "run.json nested 100000 deep, verify": (damaged(deep_json, "verify"), "1 damaged"),
        "run.json nested 100000 deep, resume": (damaged(deep_json, "resume"), "nested too deeply"),
        "run.json nested 100000 deep, samples": (damaged(deep_json, "samples"), "nested too deep"),
        "run.json nested 100000 deep as --config": (
            lambda tmp, run: [
                "hmc",
                "--config",
                str(changed(tmp, run, deep_json)),
                "--dir",
                str(tmp / "new"),
            ],
            "nested too deeply",
        ),
        "evaluate where predictions is a file": (
            damaged(predictions_file),
            "predictions' is a file",
        ),
        # Refused before the first write, a resume included.
        "resume with 2^40 iterations": (
            resumed_with("--num-iterations", str(2**40)),
            "--num-iterations 1099511627776 out of range",
        ),
        "resume with a float32 overflow": (
            resumed_with("--divergence-threshold", "1e39"),
            "is beyond float32",
        ),
        # Silent failure: a posterior that is not finite is refused by every reader.
        "evaluate a non-finite posterior": (damaged(nan_sample), "holds NaN or infinite values"),
        "samples of a non-finite posterior": (
            damaged(nan_sample, "samples"),
            "holds NaN or infinite values",
        ),
        "prune a non-finite posterior": (
            lambda tmp, run: ["prune", str(changed(tmp, run, nan_sample)), "--out", str(tmp / "p")],
            "holds NaN or infinite values",
        ),
        "surface through a non-finite posterior": (
            lambda tmp, run: [
                "surface",
                str(changed(tmp, run, nan_sample)) + ":0",
                str(run),
                str(run) + ":1",
                "--out",
                str(tmp / "s"),
            ],
            "holds NaN or infinite values",
        ),
        "init checkpoint with a non-finite posterior": (
            lambda tmp, run: [
                *HMC,
                "--dir",
                str(tmp / "new"),
                "--init-checkpoint",
                str(changed(tmp, run, nan_sample)) + ":1",
            ],
            "holds NaN or infinite values",
        ),
        # Numbers in the run's dtype: finite in float64 is not enough for a float32 run.
        "weight decay 1e40 in float32": (
            hmc_flag("--weight-decay", "1e40"),
            "--weight-decay 1e+40 is beyond float32",
        ),
        "noise std 1e300 in float32": (
            hmc_flag("--noise-std", "1e300"),
            "--noise-std 1e+300 is beyond float32",
        ),
        "noise std 1e-45 in float32": (hmc_flag("--noise-std", "1e-45"), "(it would become 0)"),
        "temperature 1e300 in float32": (
            hmc_flag("--temperature", "1e300"),
            "--temperature 1e+300 is beyond float32",
        ),
        "temperature 1e-300 in float32": (
            hmc_flag("--temperature", "1e-300"),
            "(it would become 0)",
        ),
        "step size 1e39 in float32": (
            hmc_flag("--step-size", "1e39"),
            "--step-size 1e+39 is beyond float32",
        ),
        "divergence threshold 1e39 in float32": (
            hmc_flag("--divergence-threshold", "1e39"),
            "is beyond float32",
        ),
        "sgd step size 1e-40 in float32": (
            sgd_flag("--init-step-size", "1e-40"),
            "(it would become 0)",
        ),
        "sgd clipping 1e39 in float32": (sgd_flag("--clip-grad-norm", "1e39"), "beyond float32"),
        "vi sigma 1e300 in float32": (
            vi_flag("--vi-sigma-init", "1e300"),
            "--vi-sigma-init 1e+300 is beyond float32",
        ),
        "prior scale 1e300 in float32": (
            hmc_flag("--prior", "gaussian:scale=1e300"),
            "prior 'gaussian': scale 1e+300 is beyond float32",
        ),
        "layer prior scale 1e-300 in float32": (
            hmc_flag("--layer-prior", "Dense_0=laplace:scale=1e-300"),
            "scale 1e-300 is beyond float32",
        ),
        "noise prior rate 1e300 in float32": (
            lambda tmp, run: [
                *[a for a in HMC if a not in ("--noise-std", "0.35")],
                "--noise-prior",
                "gamma:concentration=0.5,rate=1e300",
                "--dir",
                str(tmp / "new"),
            ],
            "beyond float32",
        ),
        "npz holding 1e300": (
            npz_case(savez(x_train=np.full((20, 3), 1e300))),
            "beyond float32's range",
        ),
        "npz targets 1e300": (npz_case(savez(y_test=np.full(6, 1e300))), "beyond float32's range"),
        # Integers beyond what a shape or a jitted argument holds, declared with the setting.
        "chains 10^23": (hmc_flag("--num-chains", str(10**23)), "--num-chains 10000000000000000"),
        "chains 2^17": (hmc_flag("--num-chains", str(2**17)), "allowed: 1..65536"),
        "leapfrog cap 2^40": (
            hmc_flag("--max-num-leapfrog-steps", str(2**40)),
            "--max-num-leapfrog-steps 1099511627776 out of range",
        ),
        "iterations 2^40": (hmc_flag("--num-iterations", str(2**40)), "allowed: 1..2147483647"),
        "burn-in 2^40": (hmc_flag("--num-burn-in", str(2**40)), "--num-burn-in 1099511627776"),
        "checkpoint every 2^40": (hmc_flag("--checkpoint-every", str(2**40)), "out of range"),
        "nuts tree depth 40": (
            method_flag(
                ["nuts", *PROBLEM, "--num-iterations", "2", "--no-progress"],
                "--max-tree-depth",
                "40",
            ),
            "--max-tree-depth 40 out of range; allowed: 1..16",
        ),
        "ensemble members 10^20": (
            method_flag(["ensemble", *SGD[1:], "--num-members", "2"], "--num-members", str(10**20)),
            "--num-members 100000000000000000000",
        ),
        "sgd batch size 2^40": (sgd_flag("--batch-size", str(2**40)), "out of range"),
        "sgd epochs 2^40": (sgd_flag("--num-epochs", str(2**40)), "allowed: 1..2147483647"),
        "sgmcmc cycle 2^40": (
            lambda tmp, run: [
                "sgmcmc",
                *SGD[1:],
                "--step-size-schedule",
                "cyclical",
                "--cycle-length",
                str(2**40),
                "--dir",
                str(tmp / "new"),
            ],
            "--cycle-length 1099511627776 out of range",
        ),
        "vi samples per step 10^20": (
            vi_flag("--vi-num-samples", str(10**20)),
            "--vi-num-samples 100000000000000000000 out of range",
        ),
        "vi evaluation draws 10^20": (
            vi_flag("--vi-ensemble-size", str(10**20)),
            "--vi-ensemble-size 100000000000000000000 out of range",
        ),
        "laplace draws 10^20": (
            lambda tmp, run: [
                "laplace",
                "--map-run",
                str(run),
                "--num-samples",
                str(10**20),
                "--dir",
                str(tmp / "new"),
            ],
            "--num-samples 100000000000000000000 out of range",
        ),
        "subset 2^40": (
            hmc_flag("--subset-train-to", str(2**40)),
            "--subset-train-to 1099511627776",
        ),
        "chunk size 2^40": (hmc_flag("--chunk-size", str(2**40)), "--chunk-size 1099511627776"),
        "surface grid 100000": (
            lambda tmp, run: [
                "surface",
                str(run),
                str(run),
                str(run),
                "--grid-size",
                "100000",
                "--out",
                str(tmp / "s"),
            ],
            "--grid-size 100000 out of range; allowed: 2..1024",
        ),
        "surface chunk 2^40": (
            lambda tmp, run: [
                "surface",
                str(run),
                str(run),
                str(run),
                "--chunk-size",
                str(2**40),
                "--out",
                str(tmp / "s"),
            ],
            "--chunk-size 1099511627776 out of range",
        ),
        # Files whose headers and contents must be checked before anything is allocated or parsed.
        "npz 0 features": (
            npz_case(savez(x_train=np.zeros((20, 0)), x_test=np.zeros((6, 0)))),
            "0 features per example",
        ),
        "npz header claims 3e11 elements": (
            npz_case(lying_npy_header),
            "declares shape (300000000000,)",
        ),
        "config file with a date for a number": (
            with_config(HMC, toml_file("step_size = 1979-05-27\n"), drop="--step-size"),
            "step_size = datetime.date(1979, 5, 27) is a date; allowed: a number",
        ),
        "config file with a time for a name": (
            with_config(HMC, toml_file("model = 07:32:00\n"), drop="--model"),
            "model = datetime.time(7, 32) is a time; allowed: a string",
        ),
        "config file that is binary": (
            with_config(HMC, toml_file(bytes(range(256)))),
            "is not valid TOML",
        ),
        "prior file that is binary": (
            with_config(HMC, toml_file(bytes(range(256))), flag="--prior-file"),
            "cannot be read as TOML",
        ),
        "prior file with a date": (
            with_config(
                HMC,
                toml_file('[prior]\nfamily = "laplace"\nscale = 1979-05-27\n'),
                flag="--prior-file",
            ),
            "invalid scale=1979-05-27",
        ),
        "prior file scale beyond float32": (
            with_config(
                HMC, toml_file('[prior]\nfamily = "laplace"\nscale = 1e300\n'), flag="--prior-file"
            ),
            "scale 1e+300 is beyond float32",
        ),
        # The environment: cluster variables and a coordinator, in one line naming them.
        "SLURM_NTASKS not a number": (
            with_env(
                {**SLURM, "SLURM_NTASKS": "abc"}, lambda tmp, run: [*HMC, "--dir", str(tmp / "new")]
            ),
            "SLURM_NTASKS='abc' is not an integer",
        ),
        "SLURM_PROCID negative": (
            with_env(
                {**SLURM, "SLURM_PROCID": "-1"}, lambda tmp, run: [*HMC, "--dir", str(tmp / "new")]
            ),
            "SLURM_PROCID='-1' is not an integer >= 0",
        ),
        "OMPI_COMM_WORLD_SIZE not a number": (
            with_env(
                {"OMPI_MCA_orte_hnp_uri": "x", "OMPI_COMM_WORLD_SIZE": "abc"},
                lambda tmp, run: [*HMC, "--dir", str(tmp / "new")],
            ),
            "OMPI_COMM_WORLD_SIZE='abc'",
        ),
        "coordinator unreachable": (
            lambda tmp, run: [
                *HMC,
                "--dir",
                str(tmp / "new"),
                "--coordinator-address",
                "127.0.0.1:1",
                "--num-processes",
                "2",
                "--process-id",
                "1",
                "--distributed-timeout",
                "1",
            ],
            "--coordinator-address 127.0.0.1:1 cannot be reached within --distributed-timeout 1 s",
        ),
        "coordinator host unknown": (
            lambda tmp, run: [
                *HMC,
                "--dir",
                str(tmp / "new"),
                "--coordinator-address",
                "no-such-host.invalid:1234",
                "--num-processes",
                "2",
                "--process-id",
                "1",
                "--distributed-timeout",
                "1",
            ],
            "cannot be resolved",
        ),
        # Advice names only flags the command takes.
        "report into a folder with other files": (
            lambda tmp, run: ["report", str(run), "--out", str(a_folder_with_a_file(tmp))],
            "pass --overwrite",
        ),
        "paper into a folder with other files": (
            lambda tmp, run: ["paper", "--scale", "tiny", "--out", str(a_folder_with_a_file(tmp))],
            "is not empty; allowed: an empty folder",
        ),
        "datasets grid seed -1": (
            lambda tmp, run: [
                "datasets",
                "--show-corruptions",
                "cifar10",
                "--seed",
                "-1",
                "--out",
                str(tmp / "g.png"),
            ],
            "--seed -1 out of range",
        ),
        "datasets grid out .txt": (
            lambda tmp, run: [
                "datasets",
                "--show-corruptions",
                "cifar10",
                "--out",
                str(tmp / "grid.txt"),
            ],
            "must name a .png file",
        ),
        "datasets grid out a folder": (
            lambda tmp, run: ["datasets", "--show-corruptions", "cifar10", "--out", str(tmp)],
            "must name a .png file",
        ),
        "datasets grid out a folder named .png": (
            lambda tmp, run: [
                "datasets",
                "--show-corruptions",
                "cifar10",
                "--out",
                str(a_folder(tmp / "grid.png")),
            ],
            "is a directory",
        ),
    }
)


def damaged_copy(tmp: Path, run: Path) -> Path:
    return changed(tmp, run, truncate("samples/sample_0000002.npz"))


def changed(tmp: Path, run: Path, change: Callable[[Path], None]) -> Path:
    copy = Path(shutil.copytree(run, tmp / "source"))
    change(copy)
    return copy


def snapshot(*folders: Path) -> dict[str, bytes | str | None]:
    """Every file's bytes, every folder (as ``None``) and every link (as its target) under
    ``folders``."""
    out: dict[str, bytes | str | None] = {}
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            if p.is_symlink():
                out[str(p)] = f"-> {os.readlink(p)}"
            else:
                out[str(p)] = None if p.is_dir() else p.read_bytes()
    return out


def test_the_matrix_is_large():
    assert len(CASES) >= 170


@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_input_is_one_line_exit_2_and_changes_nothing(
    name, finished, tmp_path, monkeypatch, capsys
):
    make, message = CASES[name]
    work = tmp_path / "work"
    work.mkdir()
    args = (
        (work, finished, monkeypatch)
        if getattr(make, "needs_monkeypatch", False)
        else (work, finished)
    )
    argv = make(*args)
    monkeypatch.chdir(work)  # a run written into the current folder would show up here
    capsys.readouterr()
    before = snapshot(work, finished.parent)
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("bnnkit: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert message in err, err
    assert snapshot(work, finished.parent) == before
    assert_advice_names_own_flags(argv, err)


def command_flags() -> dict[str, set[str]]:
    """Every command's option strings."""
    from bnnkit.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    return {
        name: {option for action in p._actions for option in action.option_strings}
        for name, p in commands.items()
    }


def assert_advice_names_own_flags(argv: list[str], err: str) -> None:
    """A flag named in a message is one the command takes, or one of the command the message
    names as ``bnnkit NAME`` before it (``report`` must not advise ``--resume``); after
    ``bnnkit METHOD`` (a run's method, when its record cannot tell which), a flag every method
    takes. A flag the user wrote is the value being named, not advice."""
    import re

    from bnnkit.inference import METHODS

    flags = command_flags()
    flags["METHOD"] = set.intersection(*(flags[method] for method in METHODS))
    written = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    command = next(a for a in argv if not a.startswith("-"))
    # The text after "bnnkit NAME" speaks of that command's flags.
    parts = re.split(r"bnnkit ([a-z][a-z-]*|METHOD)", err.removeprefix("bnnkit: error: "))
    owners = [command, *parts[1::2]]
    for owner, text in zip(owners, parts[0::2], strict=True):
        for named in set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)) - written:
            assert named in flags.get(owner, set()), (
                f"{named!r} is no flag of bnnkit {owner}: {err}"
            )


def run_entries(run: Path) -> list[str]:
    """Every file and folder a run writes, from a finished and evaluated run's listing (its
    lock included, which exists while it runs)."""
    return sorted({str(p.relative_to(run)) for p in run.rglob("*")} | {".lock"})


@pytest.fixture(scope="module")
def evaluated(finished, tmp_path_factory) -> Path:
    path = Path(shutil.copytree(finished, tmp_path_factory.mktemp("evaluated") / "run"))
    assert main(["evaluate", str(path)]) == 0
    return path


def test_a_link_in_a_run_directory_is_never_written_through(evaluated, tmp_path, capsys):
    """Each file or folder of a run replaced by a symbolic link to a copy outside it (or to a
    path that does not exist yet): every command that writes the run refuses in one line
    naming the link, and writes nothing, inside or outside."""
    entries = run_entries(evaluated)
    assert {
        "run.json",
        "state.npz",
        "manifest.jsonl",
        "metrics.jsonl",
        "samples",
        "samples/sample_0000003.npz",
        "evaluation.json",
        "predictions",
        "predictions/test.npz",
        ".lock",
    } <= set(entries), entries
    commands = {
        "resume": lambda run: [
            *with_flag(HMC, "--num-iterations", "6"),
            "--dir",
            str(run),
            "--resume",
        ],
        "overwrite": lambda run: [*HMC, "--dir", str(run), "--overwrite"],
        "evaluate": lambda run: ["evaluate", str(run)],
    }
    for entry in entries:
        for dangling in (False, True):
            for name, argv_of in commands.items():
                work = tmp_path / f"{entry.replace('/', '_')}-{dangling}-{name}"
                work.mkdir()
                run = Path(shutil.copytree(evaluated, work / "run"))
                target = work / "outside"
                own = run / entry
                if not dangling and own.is_dir():
                    shutil.copytree(own, target)
                elif not dangling and own.exists():
                    shutil.copy(own, target)
                elif not dangling:  # the lock, which a finished run does not hold
                    target.write_text("a file outside the run\n")
                if own.is_dir():
                    shutil.rmtree(own)
                elif own.exists():
                    own.unlink()
                own.symlink_to(target, target_is_directory=not dangling and target.is_dir())
                before = snapshot(work)
                capsys.readouterr()
                code = main(argv_of(run))
                err = capsys.readouterr().err
                assert code == 2, (entry, name, err)
                assert "is a symbolic link" in err and entry.split("/")[-1] in err, (entry, err)
                assert err.count("\n") == 1
                assert snapshot(work) == before, (entry, dangling, name)
                assert target.exists() != dangling


def test_an_unexpected_error_is_one_line_exit_1_and_debug_shows_it(finished, monkeypatch, capsys):
    # The name the command calls.
    evaluate_module = importlib.import_module("bnnkit.commands.evaluate")

    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(evaluate_module, "evaluate", broken)
    assert main(["evaluate", str(finished)]) == 1
    err = capsys.readouterr().err
    assert err == (
        "bnnkit: error: unexpected RuntimeError: boom second line; run with --debug "
        "for the traceback\n"
    )
    with pytest.raises(RuntimeError, match="boom"):
        main(["evaluate", str(finished), "--debug"])


def test_a_refusal_of_the_system_is_one_line_exit_2(finished, tmp_path, monkeypatch, capsys):
    from bnnkit import storage

    def refused(path, obj):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(storage, "write_json", refused)
    copy = copy_run(finished, tmp_path)
    assert main(["evaluate", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err == f"bnnkit: error: '{copy / 'evaluation.json'}': Permission denied\n"


def test_a_torn_line_in_the_log_is_skipped(finished, tmp_path, capsys):
    copy = copy_run(finished, tmp_path)
    with open(copy / "metrics.jsonl", "a") as f:
        f.write('7\n{"iteration": 4, "acceptance_rate": [1.0, 1.')  # a foreign and a torn line
    assert main(["evaluate", str(copy), "--json"]) == 0
    torn = json.loads(capsys.readouterr().out)
    intact_copy = Path(shutil.copytree(finished, tmp_path / "intact"))
    assert main(["evaluate", str(intact_copy), "--json"]) == 0
    intact = json.loads(capsys.readouterr().out)
    assert torn["test"] == intact["test"] and torn["sampler"] == intact["sampler"]
