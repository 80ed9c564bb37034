#!/usr/bin/env bash
# make mutants: every deliberately broken build of the service must be
# caught. For each row {tag, package, tests} of mutants.tsv the package's
# tests are run with -tags tag (for packages under ./tests/, the lockd and
# lockproxy binaries they start are built with it too); a row passes only
# if the tests FAIL. A test that does not exist, a build that does not
# compile, or a test that passes all fail the run.
#
#   scripts/mutants.sh               every row
#   MUTANTS='tagA tagB' scripts/mutants.sh   chosen rows
#
# Rows run one at a time (the machine may have 2 cores); each test run is
# bounded by MUTANT_TIMEOUT, and a row not caught is tried again, up to
# MUTANT_TRIES runs (2).
set -uo pipefail
cd "$(dirname "$0")/.."
table=${MUTANTS_TABLE:-mutants.tsv}
timeout=${MUTANT_TIMEOUT:-10m}
tries=${MUTANT_TRIES:-2}
only=" ${MUTANTS:-} "
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go=${GO:-go}

rows=0 caught=0 missed=()
while IFS=$'\t' read -r tag pkg tests note; do
  case "$tag" in ''|'#'*) continue ;; esac
  if [ "$only" != "  " ] && [[ "$only" != *" $tag "* ]]; then continue; fi
  rows=$((rows + 1))
  log="$work/$tag.log"
  start=$(date +%s)
  env=()
  btags=$tag
  [[ "$pkg" == ./tests/chaos* ]] && btags="$tag,lockd_faults" # the disk nemeses' injector
  if [[ "$pkg" == ./tests/* ]]; then
    if ! $go build -tags "$btags" -o "$work/lockd-$tag" ./server/cmd/lockd >"$log" 2>&1 ||
       ! $go build -tags "$tag" -o "$work/lockproxy-$tag" ./proxy/cmd/lockproxy >>"$log" 2>&1; then
      printf '%-36s %-24s NOT CAUGHT: the mutant does not build\n' "$tag" "$pkg"
      missed+=("$tag"); tail -5 "$log"; continue
    fi
    env=(TESTCLUSTER_LOCKD_BIN="$work/lockd-$tag" TESTCLUSTER_PROXY_BIN="$work/lockproxy-$tag")
  fi
  # A mutant's effect may depend on timing (a race it opens): a row whose
  # tests pass is run again, up to MUTANT_TRIES in all; caught once is
  # caught (the check can fail), and the tries it took are printed.
  for try in $(seq 1 "$tries"); do
    env "${env[@]}" $go test -tags "$tag" -count=1 -timeout "$timeout" -run "$tests" "$pkg" >>"$log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && grep -q -- '--- FAIL' "$log"; then break; fi
  done
  secs=$(( $(date +%s) - start ))
  if [ $rc -ne 0 ] && grep -q -- '--- FAIL' "$log"; then
    caught=$((caught + 1))
    # The first assertion line a test printed (not the cluster's log).
    first=$(grep -m1 -E '^\s+[a-z_]+_test\.go:[0-9]+: ' "$log" | sed 's/^ *//' | cut -c1-110)
    [ -n "$first" ] || first=$(grep -m1 -- '--- FAIL' "$log" | sed 's/^ *//' | cut -c1-110)
    printf '%-36s %-24s caught (%ss, try %s): %s\n' "$tag" "$pkg" "$secs" "$try" "$first"
  else
    missed+=("$tag")
    why="the tests passed"
    grep -q 'no tests to run' "$log" && why="no test matches $tests"
    [ $rc -ne 0 ] && why="failed without a test failing (build error?)"
    printf '%-36s %-24s NOT CAUGHT (%ss): %s\n' "$tag" "$pkg" "$secs" "$why"
    tail -5 "$log"
  fi
done < "$table"

echo "mutants: $rows rows, $caught caught"
if [ ${#missed[@]} -gt 0 ]; then
  echo "NOT CAUGHT: ${missed[*]}"
  exit 1
fi
[ $rows -gt 0 ] || { echo "no rows run"; exit 1; }
