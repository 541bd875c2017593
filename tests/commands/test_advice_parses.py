"""Every suggestion the verdict and the sampler's warnings can print, for every command that
makes a run, parses with that command's own parser.

The advice is enumerated from the data: each command that makes a run (every method, and
``bnnkit reference``, a composite whose chains are its second stage), times every remedy a
level of :data:`bnnkit.metrics.levels.LEVELS` can give (each level's own, L0's for divergences
and for energy errors, L1's, L2's, L3's), spelt by :func:`bnnkit.command_flags.spelling`, and
the sampler warnings in that command's words (the three forms of the stuck advice and the
capped-trajectory advice). Each flag a sentence names must be one the command takes; each flag
given with a value is parsed, with its value, by the command's parser after the flags every
run needs. A stage of ``bnnkit reference`` that diverges is advised in ``bnnkit reference``'s
flags too.
"""

from __future__ import annotations

import re

import pytest

from bnnkit.command_flags import spelling
from bnnkit.inference import METHODS
from bnnkit.metrics import halves, levels, numerics, stationarity
from bnnkit.metrics.sampler_health import capped_warning, sampler_warning

#: The commands that make a run the verdict judges.
RUN_COMMANDS = (*METHODS, "reference")
#: The flags every one of them needs.
BASE = ["--dataset", "yacht_0", "--model", "mlp_regression_small", "--dir", "runs/x"]
#: Words before a flag that ask for another value of it without giving one.
COMPARATIVE = ("larger", "longer", "smaller", "higher", "raise", "another")
FLAG = re.compile(r"--[a-z][a-z0-9-]*")
#: Every remedy the levels can give.
REMEDIES = (
    *(remedy for level in levels.LEVELS for remedy in level.remedies),
    numerics.step_remedy(1.4e-4, 1e-5),
    numerics.step_remedy(1e-5, 1e-5),
    *numerics.energy_remedies(0.1, spikes=False),
    *numerics.energy_remedies(0.1, spikes=True),
    stationarity.MORE_DRAWS,
    stationarity.ANOTHER_POSTERIOR,
    stationarity.LONGER_START,
    halves.MORE_CHAINS_OR_DRAWS,
)


def advice_of(command: str) -> list[str]:
    """Every advice string the verdict and the warnings give a run of ``command``."""
    spell = spelling(command)
    texts = [remedy.text(spell) for remedy in REMEDIES]
    for step, given in ((None, None), (1e-2, 1e-4), (1e-4, 1e-4)):
        texts.append(
            sampler_warning(0.0, 70, 360, step_size=step, given_step_size=given, spell=spell)
        )
    for method in ("hmc", "nuts"):
        texts.append(capped_warning(9, 10, method, spell))
    return list(dict.fromkeys(texts))


def suggested_flags(text: str) -> tuple[list[str], list[str]]:
    """The flags a sentence names: (command-line words of those given with their values or
    that take none, names of those asked to change without a value)."""
    argv, named = [], []
    for match in FLAG.finditer(text):
        flag = match.group()
        before = text[: match.start()].split()
        after = text[match.end() :]
        if before and before[-1] in COMPARATIVE:
            named.append(flag)
        elif after.startswith(" ") and after.split()[0][:1] not in ("", "("):
            argv.append((flag, after.split()[0].rstrip(",;)."), after))
        else:
            named.append(flag)
    return argv, named


def base_argv(parser) -> list[str]:
    """:data:`BASE` and a value of each further flag the command requires (sgd's budget)."""
    argv = list(BASE)
    for action in parser._actions:
        if action.required and action.option_strings and not set(action.option_strings) & set(BASE):
            value = (
                action.choices[0]
                if action.choices
                else "2"
                if action.type is int
                else "0.001"
                if action.type is float
                else "x"
            )
            argv += [action.option_strings[0], str(value)]
    return argv


def command_parser(command: str):
    """The parser of ``bnnkit COMMAND``, as the command line builds it."""
    import argparse

    from bnnkit.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[command]


@pytest.mark.parametrize("command", RUN_COMMANDS)
def test_every_suggestion_parses_with_the_command_that_made_the_run(command):
    parser = command_parser(command)  # the command line's own parser, not the flag table
    base = base_argv(parser)
    parser.parse_args(base)  # the flags every run needs are these
    texts = advice_of(command)
    checked = 0
    for text in texts:
        given, named = suggested_flags(text)
        for flag in named + [f for f, _, _ in given]:
            assert flag in parser._option_string_actions, (
                f"bnnkit {command} does not take {flag}, which this advice names: {text}"
            )
        argv = []
        for flag, value, _ in given:
            takes = parser._option_string_actions[flag].nargs != 0
            argv += [flag, value] if takes else [flag]
        try:
            parser.parse_args(base + argv)
        except SystemExit:
            pytest.fail(f"bnnkit {command} refuses {' '.join(argv)!r} from the advice: {text}")
        checked += 1
    assert checked == len(texts) > 10


def test_the_advice_counts_every_command(capsys):
    """How many advice strings the walk checks, all commands together (printed with -s)."""
    total = sum(len(advice_of(command)) for command in RUN_COMMANDS)
    print(f"{total} advice strings over {len(RUN_COMMANDS)} commands")
    assert total >= 10 * len(RUN_COMMANDS)


def test_a_reference_is_advised_in_its_own_flags():
    texts = " ".join(advice_of("reference"))
    for refused in (
        "--num-iterations",
        "--num-burn-in",
        "--num-chains",
        "--init-checkpoint",
        "--step-size",
        "--adapt",
        "--energy-var-end",
        "--adjusted",
    ):
        assert refused not in texts
    assert "a larger --num-samples" in texts and "a larger --members" in texts
    assert "a longer --num-tuning" in texts and "--sampler nuts" in texts


def test_each_method_is_advised_in_its_own_budget():
    texts = " ".join(advice_of("sgmcmc"))
    assert "a larger --num-epochs" in texts and "--num-iterations" not in texts
    texts = " ".join(advice_of("mclmc"))
    assert "a smaller --energy-var-end" in texts and "--adjusted" in texts
    assert "--sampler" not in texts


def test_a_stall_is_told_another_posterior_not_more_draws():
    # Random walks never settle: each chain's ESS on its first tenth and on all of it are
    # about the same handful, so more draws will not help.
    import numpy as np

    walk = np.cumsum(np.random.default_rng(0).normal(size=(2, 1000, 6)), axis=1)
    found = stationarity.stationarity(walk)
    assert found.figures["stalled"]["chains"] == [0, 1]
    assert found.remedies == (stationarity.ANOTHER_POSTERIOR,)
    text = found.remedies[0].text(spelling("hmc"))
    assert "--noise-std 0.35" in text and "--prior gaussian:scale=0.5" in text
    # A chain whose ESS grows with its length (AR(1), 0.9: about 3 on its first 100 draws,
    # 12 to 22 on all 1000, short of the 50 it needs) is still told to draw more.
    rng = np.random.default_rng(1)
    draws = np.empty((2, 1000, 6))
    draws[:, 0] = rng.normal(size=(2, 6))
    for t in range(1, 1000):
        draws[:, t] = 0.9 * draws[:, t - 1] + np.sqrt(1 - 0.9**2) * rng.normal(size=(2, 6))
    slow = stationarity.stationarity(draws)
    assert slow.status == "fail" and slow.figures["stalled"] is None
    assert slow.remedies == (stationarity.MORE_DRAWS,)


@pytest.mark.slow
def test_warnings_while_a_reference_samples_speak_bnnkit_reference(tmp_path, monkeypatch):
    # The chains of a reference run through the one driver: the stuck-or-unstable warnings it
    # prints while they sample must name bnnkit reference's flags, not the sampler's. A run in
    # a folder's chains/ beside its reference.json is a reference's chains, as the readers
    # judge it (bnnkit.runs.verdict.run_command); the tally the driver builds is watched. A
    # stage is opened only under its composite's lock.
    from bnnkit.command_flags import command_line_words
    from bnnkit.inference import hmc
    from bnnkit.problem import ProblemConfig
    from bnnkit.runs import lock
    from bnnkit.runs import loop as driver

    folder = tmp_path / "ref"
    folder.mkdir()
    (folder / "reference.json").write_text(
        '{"kind": "reference", "config": {"num_tuning": 500, "members": 8}}'
    )
    made = []
    tally_class = driver.SamplerTally

    def watched(*args, **kwargs):
        made.append(tally_class(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(driver, "SamplerTally", watched)
    config = hmc.Config(step_size=1e-3, trajectory_len=0.01, num_iterations=2, num_burn_in=1)
    problem = ProblemConfig("yacht_0", "linear", noise_std=0.5)
    # The command line runs every command in command_line_words(); Python calls do not.
    with lock.hold(folder), command_line_words():  # as the reference holds its folder
        driver.run(problem, config, folder / "chains", progress=False)
    with lock.hold(folder):
        driver.run(problem, config, folder / "chains", progress=False, overwrite=True)
    spelt = [(t.spell("num_tuning"), t.spell("num_burn_in"), t.spell("noise_std")) for t in made]
    assert spelt == [("--num-tuning", None, "--noise-std"), ("num_tuning", None, "noise_std")]
    # And a run of its own speaks its method's flags, or its Config's fields.
    made.clear()
    with command_line_words():
        driver.run(problem, config, tmp_path / "single", progress=False)
    driver.run(problem, config, tmp_path / "single", progress=False, overwrite=True)
    assert [(t.spell("num_burn_in"), t.spell("num_tuning")) for t in made] == [
        ("--num-burn-in", None),
        ("num_burn_in", None),
    ]


@pytest.mark.slow
def test_a_stage_of_a_reference_that_diverges_is_advised_in_bnnkit_reference_s_flags(
    tmp_path, capsys
):
    # The ensemble stage diverges at once at a step of 1e39; the error names what to try in
    # the flags of the command that was called (--ensemble-step-size), never the stage's own
    # (--init-step-size, --clip-grad-norm), and each flag it names parses with that command.
    from bnnkit.cli import main

    argv = [*BASE[:4], "--ensemble-step-size", "1e39", "--members", "2"]
    argv += ["--ensemble-steps", "20", "--dir", str(tmp_path / "ref"), "--no-progress"]
    assert main(["reference", *argv]) == 2
    error = capsys.readouterr().err
    assert "the ensemble stage of the reference" in error and "NaN or infinite" in error
    assert "a smaller --ensemble-step-size" in error
    assert "--init-step-size" not in error and "--clip-grad-norm" not in error
    parser = command_parser("reference")
    for named in FLAG.findall(error):
        assert named in parser._option_string_actions, named
