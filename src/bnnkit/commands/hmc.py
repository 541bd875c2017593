"""``bnnkit hmc``: full-batch HMC chains on a dataset, then evaluation."""

from __future__ import annotations

import argparse

from bnnkit.commands.common import add_problem_arguments, problem_config


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_problem_arguments(p)
    g = p.add_argument_group("HMC")
    g.add_argument("--step-size", type=float, required=True, help="initial leapfrog step size")
    g.add_argument("--trajectory-len", type=float, required=True,
                   help="integration time; ceil(trajectory_len / step_size) leapfrog steps")
    g.add_argument("--num-iterations", type=int, required=True,
                   help="HMC iterations, burn-in included")
    g.add_argument("--num-burn-in", type=int, default=0,
                   help="iterations discarded (and used to adapt the step size)")
    g.add_argument("--num-chains", type=int, default=1, help="independent chains run together")
    g.add_argument("--max-num-leapfrog-steps", type=int, default=10_000)
    g.add_argument("--target-accept-rate", type=float, default=0.8)
    g.add_argument("--no-adapt-step-size", dest="adapt_step_size", action="store_false",
                   help="keep the given step size during burn-in")
    g.add_argument("--no-mh-during-burn-in", dest="mh_during_burn_in", action="store_false",
                   help="accept every finite trajectory during burn-in (as bnn_hmc can)")
    g.add_argument("--seed", type=int, default=0)
    r = p.add_argument_group("run directory")
    r.add_argument("--dir", required=True, help="run directory to create (or resume)")
    r.add_argument("--resume", action="store_true",
                   help="continue the run in --dir exactly (only --num-iterations may change)")
    r.add_argument("--overwrite", action="store_true", help="replace the run in --dir")
    r.add_argument("--checkpoint-every", type=int, default=1,
                   help="write the full chain state every N iterations")
    r.add_argument("--shard", choices=("auto", "chains", "data", "none"), default="auto",
                   help="with several devices: split chains, or the training data, over them")
    r.add_argument("--no-progress", dest="progress", action="store_false")
    r.add_argument("--no-evaluate", dest="evaluate", action="store_false",
                   help="skip the evaluation at the end")


def run(args: argparse.Namespace) -> int:
    from bnnkit import chains
    from bnnkit.evaluate import evaluate
    from bnnkit.report.tables import print_table

    config = chains.HMCConfig(
        step_size=args.step_size, trajectory_len=args.trajectory_len,
        num_iterations=args.num_iterations, num_burn_in=args.num_burn_in,
        num_chains=args.num_chains, max_num_leapfrog_steps=args.max_num_leapfrog_steps,
        target_accept_rate=args.target_accept_rate, adapt_step_size=args.adapt_step_size,
        mh_during_burn_in=args.mh_during_burn_in, seed=args.seed,
    )
    result = chains.run(
        problem_config(args), config, args.dir, resume=args.resume, overwrite=args.overwrite,
        checkpoint_every=args.checkpoint_every, progress=args.progress, shard=args.shard,
    )
    print(f"{result.num_iterations} iterations in {result.seconds:.1f} s; samples in {args.dir}")
    if args.evaluate:
        print_table(evaluate(args.dir), title=f"HMC on {args.dataset}")
    return 0


from bnnkit.commands import Command  # noqa: E402  (after the functions it names)

COMMAND = Command(help="full-batch Hamiltonian Monte Carlo", add_arguments=add_arguments, run=run)
