"""Time FineFractalDB generation at the published rendering settings and extrapolate to 1,000 classes.

    python benchmarks/generation_speed.py --classes 100 --instances 1000 --workers 2

Generation (class filter + perturbations + occupancy renderings) costs the same for every class
on average, so the time for ``--classes`` classes scales linearly to the full 1,000.
"""

from __future__ import annotations

import json

from fdsml.ifs.finefractaldb import FineFractalDBConfig
from fdsml.families.finefractaldb import generate_finefractaldb
from fdsml.ifs.render import RenderSettings
from timing import parser


def main() -> None:
    command = parser(__doc__)
    command.add_argument("--classes", type=int, default=100)
    command.add_argument("--instances", type=int, default=1000)
    command.add_argument("--workers", type=int, default=2)
    command.add_argument("--size", type=int, default=256)
    command.add_argument("--points", type=int, default=100_000)
    command.add_argument("--full-classes", type=int, default=1000)
    args = command.parse_args()

    config = FineFractalDBConfig(
        n_classes=args.classes,
        instances_per_class=args.instances,
        render=RenderSettings(size=args.size, points=args.points),
        workers=args.workers,
    )
    _, summary = generate_finefractaldb(config)
    seconds = summary["seconds"]
    print(
        json.dumps(
            {
                "classes": args.classes,
                "instances_per_class": args.instances,
                "workers": args.workers,
                "seconds": seconds,
                "instances_per_s": round(summary["n_instances"] / seconds, 1),
                "extrapolated_full_minutes": round(seconds * args.full_classes / args.classes / 60, 1),
                "class_acceptance_rate": round(summary["class_acceptance_rate"], 3),
                "instance_acceptance_rate": round(summary["instance_acceptance_rate"], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
