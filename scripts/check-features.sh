#!/usr/bin/env bash
# Checks that building weir-cli alone (`cargo run --release -p weir-cli`,
# the README's first command) compiles every dependency exactly as a build
# of the whole workspace and `cargo bench` do, so that neither compiles any
# of it again. Cargo compiles a crate once per feature set; when a member
# turns on a feature weir-cli's graph lacks, add it to
# runtime/workspace-hack/Cargo.toml. Reads cargo's unit graphs only: builds
# nothing, takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# --unit-graph is unstable; it only prints the plan.
graph() { RUSTC_BOOTSTRAP=1 cargo "$@" --locked --unit-graph -Z unstable-options; }
graph build --release -p weir-cli >"$scratch/cli.json"
graph build --release --workspace >"$scratch/workspace.json"
graph bench --workspace --no-run >"$scratch/bench.json"
python3 - "$scratch" <<'PY'
import hashlib, json, sys

def units(path):
    """Each unit's identity: what it is and, recursively, what it links."""
    graph = json.load(open(path))["units"]
    memo = {}

    def ident(i):
        if i not in memo:
            u = graph[i]
            deps = sorted(ident(d["index"])[0] for d in u["dependencies"])
            key = [u["pkg_id"], u["target"]["name"], u["target"]["kind"], u["mode"],
                   sorted(u["features"]), u["platform"], u["profile"].get("opt_level"), deps]
            name = u["pkg_id"].split("#")[-1]
            memo[i] = (hashlib.sha1(json.dumps(key).encode()).hexdigest(), name,
                       u["target"]["name"], ",".join(sorted(u["features"])))
        return memo[i]

    return [ident(i) for i in range(len(graph))]

scratch = sys.argv[1]
cli = units(f"{scratch}/cli.json")
failed = False
for other in ("workspace", "bench"):
    theirs = units(f"{scratch}/{other}.json")
    known = {u[0] for u in theirs}
    missing = sorted({u[1:] for u in cli if u[0] not in known})
    if missing:
        failed = True
        # The causes: units whose own features differ. The rest only link one.
        feature_sets = {(u[1], u[2], u[3]) for u in theirs}
        causes = [m for m in missing if m not in feature_sets]
        print(f"check-features: {len(missing)} of weir-cli's {len(cli)} units are compiled "
              f"differently in the {other} build, {len(missing) - len(causes)} of them only "
              f"because they link one of these:")
        for name, target, features in causes:
            there = sorted({u[3] for u in theirs if u[1] == name and u[2] == target})
            print(f"  {name} ({target}): features [{features}] here, {there} there")
    else:
        print(f"check-features: the {other} build reuses all {len(cli)} of weir-cli's units")
if failed:
    print("check-features: add the features to runtime/workspace-hack/Cargo.toml")
    sys.exit(1)
PY
