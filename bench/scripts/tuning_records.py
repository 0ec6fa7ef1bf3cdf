#!/usr/bin/env python3
"""Where a tuning database's cold tuning went, from the records CubeCL keeps in it.

CubeCL 0.11.3 writes an account of its own work beside its tuning (`records/v1/...` in the
environment database, cubecl-environment's `records`): every kernel it compiled, with the time
that took, and every autotune decision, with each candidate it ran and what compiling and timing
that candidate took. A database a run tuned into (`target/environment/default.db`,
`~/.cache/cubecl/default.db`) or a bundle `--save-tuning` wrote carries them, so a GPU lent for
a few minutes leaves its cold start's account behind in the bundle it brings back.

    python3 bench/scripts/tuning_records.py bench/gpu/tuning/NVIDIA-H200.db

prints the compilations by kernel type, the decisions by tuning table, and the candidates of
the matrix products (`--table TEXT` for another table) with how often each won. Needs `cbor2`
(`pip install cbor2`: CubeCL writes the records in CBOR). The file is opened immutable: SQLite
then writes nothing beside it (a read-only open of a WAL database leaves `-shm` and `-wal`).
"""

import argparse
import collections
import sqlite3

import cbor2


def seconds(duration):
    return duration["secs"] + duration["nanos"] / 1e9


def records(db, kind):
    rows = db.execute("SELECT value FROM entries WHERE namespace = ?", (f"records/v1/{kind}",))
    return [cbor2.loads(value)["record"] for (value,) in rows]


def compilations(db):
    by_kernel = collections.defaultdict(lambda: [0, 0.0])
    for record in records(db, "compilation"):
        kernel = record["kernel"].split("<")[0].split("::")[-1]
        by_kernel[kernel][0] += 1
        by_kernel[kernel][1] += seconds(record["duration"])
    total = sum(s for _, s in by_kernel.values())
    count = sum(n for n, _ in by_kernel.values())
    print(f"compilations: {count}, {total:.1f} s")
    for kernel, (n, s) in sorted(by_kernel.items(), key=lambda item: -item[1][1])[:12]:
        print(f"  {kernel[:48]:48} {n:5} {s:8.1f} s  {s / n:5.2f} s each")


def decisions(db):
    by_table = collections.defaultdict(lambda: [0, 0, 0.0, 0])
    for record in records(db, "autotune"):
        table = by_table[record["table"].split("/")[-1]]
        table[0] += 1
        table[1] += len(record["trials"])
        table[2] += seconds(record["wall"])
        table[3] += record["short_circuit"] is not None
    print("decisions (a decision's time includes those made inside it):")
    for name, (n, trials, wall, short) in sorted(by_table.items(), key=lambda item: -item[1][2]):
        print(f"  {name[:52]:52} {n:4} decisions {trials:5} candidates run {wall:8.1f} s"
              f"  {short} cut short")


def candidates(db, table):
    by_name = collections.defaultdict(lambda: [0, 0.0, 0])
    for record in records(db, "autotune"):
        if table not in record["table"]:
            continue
        for trial in record["trials"]:
            by_name[trial["name"]][0] += 1
            by_name[trial["name"]][1] += seconds(trial["wall"])
        names = {planned["index"]: planned["name"] for planned in record["plan"]}
        if record["winner"] in names:
            by_name[names[record["winner"]]][2] += 1
    print(f"candidates of `{table}` (compiling and timing each):")
    for name, (n, wall, won) in sorted(by_name.items(), key=lambda item: -item[1][1]):
        print(f"  {name[:56]:56} run {n:4}  {wall:7.1f} s  {wall / n:5.2f} s each  won {won}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database", help="a tuning database or bundle")
    parser.add_argument("--table", default="matmul-tune-base",
                        help="the tuning table whose candidates to list (a part of its name)")
    args = parser.parse_args()
    db = sqlite3.connect(f"file:{args.database}?immutable=1", uri=True)
    compilations(db)
    decisions(db)
    candidates(db, args.table)


if __name__ == "__main__":
    main()
