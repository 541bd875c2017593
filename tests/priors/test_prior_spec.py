"""The prior spec parser and the TOML form: round trips, and one-line refusals of bad input."""

from __future__ import annotations

import dataclasses

import pytest

from bnnkit import priors
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.priors import spec as spec_lib
from bnnkit.problem import ProblemConfig

CANONICAL = [
    "gaussian",
    "gaussian:scale=0.5",
    "gaussian:weight_decay=10",
    "fanin_gaussian",
    "fanin_gaussian:scale=1.4142135623730951",
    "scale_mixture:pi=0.5,sigma1=1,sigma2=0.0025",
    "mixture:weights=0.2/0.8,scales=1/0.01",
    "mixture:weights=0.25/0.25/0.5,scales=1/2/0.1,locs=-1/1/0",
    "logistic:scale=0.3",
    "laplace",
    "laplace:scale=1e-05",
    "student_t:df=3,scale=0.1",
    "hierarchical:concentration=2,scale=2",
    "ard:concentration=0.5,scale=0.001",
]


@pytest.mark.parametrize("text", CANONICAL)
def test_round_trip(text):
    spec = priors.parse(text)
    assert str(spec) == text
    assert priors.parse(str(spec)) == spec
    spec.build()  # every canonical spec makes a family


@pytest.mark.parametrize(
    "text",
    ["gamma:concentration=0.5,rate=1", "half_normal:scale=0.5", "lognormal:loc=-1,scale=0.5"],
)
def test_noise_round_trip(text):
    spec = priors.parse(text, kind="noise")
    assert str(spec) == text and priors.parse(str(spec), kind="noise") == spec


def test_canonical_form_orders_and_shortens():
    assert str(priors.parse(" student_t : scale = 0.10 , df=3.0 ")) == "student_t:df=3,scale=0.1"
    assert str(priors.parse("scale_mixture:sigma2=25e-4,sigma1=1.0,pi=.5")) == (
        "scale_mixture:pi=0.5,sigma1=1,sigma2=0.0025"
    )
    rule = priors.parse_layer_rule("Dense_*/kernel = laplace:scale=0.50")
    assert (rule.pattern, str(rule)) == ("Dense_*/kernel", "Dense_*/kernel=laplace:scale=0.5")
    assert spec_lib.canonical_layer_rules(["A=laplace", " B=gaussian:scale=2.0 "]) == (
        "A=laplace;B=gaussian:scale=2"
    )
    assert spec_lib.canonical_layer_rules("A=laplace;B=gaussian:scale=2") == (
        "A=laplace;B=gaussian:scale=2"
    )
    assert spec_lib.canonical_layer_rules(()) is None


def test_every_family_is_parseable_and_listed():
    assert set(priors.families()) == {
        "gaussian",
        "fanin_gaussian",
        "scale_mixture",
        "mixture",
        "logistic",
        "laplace",
        "student_t",
        "hierarchical",
        "ard",
    }
    assert set(priors.families("noise")) == {"gamma", "half_normal", "lognormal"}


ALL = (
    "gaussian, fanin_gaussian, scale_mixture, mixture, logistic, laplace, student_t, "
    "hierarchical, ard"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cauchy", f"unknown prior family 'cauchy'; allowed: {ALL}"),
        ("", "empty prior spec"),
        ("gaussian:scale=0", "prior 'gaussian': invalid scale=0; allowed: scale > 0"),
        ("gaussian:scale=-1", "invalid scale=-1; allowed: scale > 0"),
        ("laplace:scale=abc", "invalid scale=abc; allowed: scale > 0"),
        ("laplace:scale=nan", "invalid scale=nan"),
        ("laplace:scale=inf", "invalid scale=inf"),
        ("scale_mixture:pi=0,sigma1=1,sigma2=0.1", "invalid pi=0; allowed: 0 < pi < 1"),
        ("scale_mixture:pi=1,sigma1=1,sigma2=0.1", "invalid pi=1; allowed: 0 < pi < 1"),
        ("scale_mixture:pi=1.5,sigma1=1,sigma2=0.1", "invalid pi=1.5"),
        ("scale_mixture:pi=0.5,sigma1=1,sigma2=0", "invalid sigma2=0; allowed: sigma2 > 0"),
        (
            "scale_mixture:pi=0.5,sigma1=1",
            "prior 'scale_mixture' needs sigma2; allowed: sigma2 > 0",
        ),
        ("student_t:df=0", "invalid df=0; allowed: df > 0"),
        ("student_t:df=-2", "invalid df=-2; allowed: df > 0"),
        ("student_t:scale=1", "prior 'student_t' needs df"),
        ("laplace:df=3", "prior 'laplace' has no parameter 'df'; allowed: scale > 0"),
        ("laplace:scale", "prior 'laplace': 'scale' is not key=value"),
        ("laplace:scale=1,scale=2", "scale given twice"),
        ("gaussian:scale=1,weight_decay=1", "takes scale or weight_decay, not both"),
        (
            "mixture:weights=0.2/0.7,scales=1/2",
            "invalid weights=0.2/0.7; allowed: weights a "
            "'/'-separated list of numbers > 0 that sum to 1",
        ),
        ("mixture:weights=0.2/0.8,scales=1/2/3", "weights, scales and locs have 2, 3 and 2"),
        ("mixture:weights=0.2/0.8,scales=1/-2", "invalid scales=1/-2"),
        ("hierarchical:concentration=0,scale=1", "invalid concentration=0"),
        ("ard:concentration=1", "prior 'ard' needs scale"),
    ],
)
def test_invalid_specs_give_one_line(text, message):
    with pytest.raises(ConfigError) as info:
        priors.parse(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        (
            "laplace",
            "noise",
            "unknown noise prior family 'laplace'; allowed: gamma, half_normal, lognormal",
        ),
        ("gamma:concentration=0.5", "noise", "prior 'gamma' needs rate"),
        ("gamma", "weight", "unknown prior family 'gamma'"),
    ],
)
def test_noise_and_weight_families_are_separate(text, kind, message):
    with pytest.raises(ConfigError, match=message):
        priors.parse(text, kind=kind)


@pytest.mark.parametrize("text", ["laplace", "=laplace", "Dense_0:x=laplace"])
def test_invalid_layer_rules(text):
    with pytest.raises(ConfigError, match="must be PATTERN=SPEC"):
        priors.parse_layer_rule(text)


TOML = """
[prior]
family = "laplace"
scale = 0.1

[prior.bias]
family = "gaussian"
scale = 1

[prior.layers.Dense_1]
family = "mixture"
weights = [0.2, 0.8]
scales = [1, 0.01]

[prior.layers."Dense_0/kernel"]
family = "student_t"
df = 3

[prior.noise]
family = "gamma"
concentration = 0.5
rate = 1
"""


def test_toml_file(tmp_path):
    path = tmp_path / "priors.toml"
    path.write_text(TOML)
    assert priors.load_toml(path) == {
        "prior": "laplace:scale=0.1",
        "bias_prior": "gaussian:scale=1",
        "layer_priors": (
            "Dense_1=mixture:weights=0.2/0.8,scales=1/0.01;Dense_0/kernel=student_t:df=3"
        ),
        "noise_prior": "gamma:concentration=0.5,rate=1",
    }
    path.write_text('[prior.bias]\nfamily = "laplace"\n')
    assert priors.load_toml(path)["prior"] is None  # the default for everything else


def test_the_prior_fields_are_named_once_and_are_the_problems(tmp_path):
    # PRIOR_FIELDS names ProblemConfig's prior fields, all of them: a prior field added to one
    # and not the other fails here. A TOML table gives each of them.
    fields = {f.name for f in dataclasses.fields(ProblemConfig)}
    priors_of_the_problem = {f for f in fields if f == "prior" or f.endswith(("_prior", "_priors"))}
    assert priors_of_the_problem == set(spec_lib.PRIOR_FIELDS)
    path = tmp_path / "priors.toml"
    path.write_text('[prior]\nfamily = "laplace"\n')
    assert tuple(priors.load_toml(path)) == spec_lib.PRIOR_FIELDS


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[prior\n", "cannot be read"),
        ("[other]\nfamily = 'laplace'\n", "has no [prior] table"),
        ("[prior]\nscale = 0.1\n", '[prior] needs family = "NAME"'),
        ("[prior]\nfamily = 'laplace'\nscale = -0.1\n", "invalid scale=-0.1"),
        ("[prior]\nfamily = 'laplace'\nscale = true\n", "invalid scale=True"),
        ("[prior.layers.Dense_0]\nfamily = 'nope'\n", "unknown prior family 'nope'"),
        ("[prior.noise]\nfamily = 'gamma'\nrate = 1\n", "prior 'gamma' needs concentration"),
    ],
)
def test_bad_toml_files(tmp_path, text, message):
    path = tmp_path / "priors.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        priors.load_toml(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_missing_toml_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        priors.load_toml(tmp_path / "nope.toml")


HMC = [
    "hmc",
    "--dataset",
    "yacht_0",
    "--model",
    "mlp_regression_small",
    "--step-size",
    "1e-3",
    "--trajectory-len",
    "0.002",
    "--num-iterations",
    "3",
    "--num-burn-in",
    "1",
    "--no-progress",
    "--no-evaluate",
]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--prior", "student_t:df=0"], "prior 'student_t': invalid df=0; allowed: df > 0"),
        (["--prior", "horseshoe"], f"unknown prior family 'horseshoe'; allowed: {ALL}"),
        (["--bias-prior", "laplace:scale=0"], "invalid scale=0"),
        (["--layer-prior", "Dense_9=laplace"], "pattern 'Dense_9' matches no parameter"),
        (["--layer-prior", "laplace"], "must be PATTERN=SPEC"),
        (
            ["--noise-prior", "gamma:concentration=1,rate=1", "--noise-std", "0.3"],
            "allowed: it or --noise-std 0.3, not both",
        ),
        (["--prior", "laplace", "--weight-decay", "5"], "weight decay 5.0 is not used"),
        (["--prior-file", "missing.toml"], "prior file 'missing.toml' does not exist"),
        (["--prior-file", "x.toml", "--prior", "laplace"], "allowed: it or --prior, not both"),
    ],
)
def test_cli_refuses_bad_priors_with_one_line(extra, message, tmp_path, capsys):
    code = main([*HMC, *extra, "--dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "run" / "run.json").exists()
