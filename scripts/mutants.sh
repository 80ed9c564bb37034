#!/usr/bin/env bash
# make mutants: every deliberately broken build of the service must be
# caught. The mutants are the constants of internal/mutant, compiled in
# only with -tags lockd_mutants and selected at run time by LOCKD_MUTANT. This
# script builds once: lockd and lockproxy (lockd also with lockd_faults
# if a row is under ./tests/chaos) and each package's test binary, all
# with -tags lockd_mutants. Then for each row {mutant, package, tests} of
# mutants.tsv it runs that package's test binary with LOCKD_MUTANT=mutant
# and -test.run tests (for packages under ./tests/, the lockd and lockproxy
# they start are the binaries built here, which inherit LOCKD_MUTANT); a
# row passes only if the tests FAIL. A test that does not exist, a
# package that does not build, or a test that passes all fail the run.
#
#   scripts/mutants.sh                       every row
#   MUTANTS='mutantA mutantB' scripts/mutants.sh   chosen rows
#   MUTANTS_TABLE=other.tsv scripts/mutants.sh     another table
#   MUTANTS_EXPECT=pass MUTANTS_TABLE=mutants-chaos.tsv scripts/mutants.sh
#       rows whose tests assert that a checker fired on the mutant: a
#       row is caught when its tests PASS (and none skipped)
#
# Rows run one at a time (the machine may have 2 cores); each test run is
# bounded by MUTANT_TIMEOUT, and a row not caught is tried again, up to
# MUTANT_TRIES runs (2).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
table=${MUTANTS_TABLE:-mutants.tsv}
timeout=${MUTANT_TIMEOUT:-10m}
tries=${MUTANT_TRIES:-2}
expect=${MUTANTS_EXPECT:-fail}
case "$expect" in fail|pass) ;; *) echo "MUTANTS_EXPECT=$expect: want fail or pass"; exit 1 ;; esac
verbose= # pass: -test.v, so a skip and a pass are told apart
[ "$expect" = pass ] && verbose=-test.v
only=" ${MUTANTS:-} "
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go=${GO:-go}

# The selected rows.
rows_m=() rows_pkg=() rows_tests=()
while IFS=$'\t' read -r m pkg tests note; do
  case "$m" in ''|'#'*) continue ;; esac
  if [ "$only" != "  " ] && [[ "$only" != *" $m "* ]]; then continue; fi
  rows_m+=("$m") rows_pkg+=("$pkg") rows_tests+=("$tests")
done < "$table"
for m in ${MUTANTS:-}; do
  [[ " ${rows_m[*]} " == *" $m "* ]] || { echo "MUTANTS names $m: no such row in $table"; exit 1; }
done

# bin_name prints the file name of a package's test binary.
bin_name() { local p=${1#./}; echo "${p//\//_}.test"; }

# Build once. A package whose build fails leaves no binary: its rows
# then fail as not built.
start=$(date +%s)
build() { # log, then go args
  local log=$1; shift
  $go "$@" >>"$log" 2>&1 || { echo "build failed: go $*"; tail -5 "$log"; }
}
chaos=0 pkgs=" "
for i in "${!rows_m[@]}"; do
  [[ "${rows_pkg[$i]}" == ./tests/chaos* ]] && chaos=1
  if [[ "$pkgs" != *" ${rows_pkg[$i]} "* ]]; then
    pkgs+="${rows_pkg[$i]} "
  fi
done
build "$work/build.log" build -tags lockd_mutants -o "$work/lockd" ./server/cmd/lockd
build "$work/build.log" build -tags lockd_mutants -o "$work/lockproxy" ./proxy/cmd/lockproxy
[ $chaos = 1 ] && build "$work/build.log" build -tags lockd_mutants,lockd_faults -o "$work/lockd-faults" ./server/cmd/lockd
nbins=0
for pkg in $pkgs; do
  build "$work/build.log" test -c -tags lockd_mutants -o "$work/$(bin_name "$pkg")" "$pkg"
  nbins=$((nbins + 1))
done
echo "mutants: built lockd, lockproxy and $nbins test binaries with -tags lockd_mutants once, in $(( $(date +%s) - start ))s"

# row_caught: with MUTANTS_EXPECT=fail (the default) a test failed; with
# pass, the tests passed, none skipped (a test skips without its mutant).
row_caught() { # rc, log
  if [ "$expect" = pass ]; then
    [ "$1" -eq 0 ] && grep -q -- '--- PASS' "$2" && ! grep -q -- '--- SKIP' "$2"
  else
    [ "$1" -ne 0 ] && grep -q -- '--- FAIL' "$2"
  fi
}

rows=0 caught=0 missed=()
for i in "${!rows_m[@]}"; do
  m=${rows_m[$i]} pkg=${rows_pkg[$i]} tests=${rows_tests[$i]}
  rows=$((rows + 1))
  log="$work/$m.log"
  : >"$log"
  start=$(date +%s)
  bin="$work/$(bin_name "$pkg")"
  lockd="$work/lockd"
  [[ "$pkg" == ./tests/chaos* ]] && lockd="$work/lockd-faults" # the disk nemeses' injector
  if [ ! -x "$bin" ] || { [[ "$pkg" == ./tests/* ]] && { [ ! -x "$lockd" ] || [ ! -x "$work/lockproxy" ]; }; }; then
    printf '%-36s %-24s NOT CAUGHT: the mutant does not build\n' "$m" "$pkg"
    missed+=("$m"); continue
  fi
  env=(LOCKD_MUTANT="$m")
  [[ "$pkg" == ./tests/* ]] && env+=(TESTCLUSTER_LOCKD_BIN="$lockd" TESTCLUSTER_PROXY_BIN="$work/lockproxy")
  # A mutant's effect may depend on timing (a race it opens): a row whose
  # tests pass is run again, up to MUTANT_TRIES in all; caught once is
  # caught (the check can fail), and the tries it took are printed.
  for try in $(seq 1 "$tries"); do
    (cd "$root/$pkg" && env "${env[@]}" "$bin" -test.count=1 -test.timeout "$timeout" -test.run "$tests" $verbose) >>"$log" 2>&1
    rc=$?
    if row_caught "$rc" "$log"; then break; fi
  done
  secs=$(( $(date +%s) - start ))
  if row_caught "$rc" "$log"; then
    caught=$((caught + 1))
    # The first assertion line a test printed (not the cluster's log).
    first=$(grep -m1 -E '^\s+[a-z_]+_test\.go:[0-9]+: ' "$log" | sed 's/^ *//' | cut -c1-110)
    [ -n "$first" ] || first=$(grep -m1 -- '--- FAIL' "$log" | sed 's/^ *//' | cut -c1-110)
    [ "$expect" = pass ] && first="the checker fired; the run's $(grep -m1 -o 'violations: [0-9]*' "$log")"
    printf '%-36s %-24s caught (%ss, try %s): %s\n' "$m" "$pkg" "$secs" "$try" "$first"
  else
    missed+=("$m")
    why="the tests passed"
    grep -q 'no tests to run' "$log" && why="no test matches $tests"
    [ $rc -ne 0 ] && why="failed without a test failing (unknown mutant? see below)"
    if [ "$expect" = pass ]; then
      why="the checker found nothing (the test failed)"
      grep -q -- '--- SKIP' "$log" && why="the test skipped (its mutant not selected?)"
    fi
    printf '%-36s %-24s NOT CAUGHT (%ss): %s\n' "$m" "$pkg" "$secs" "$why"
    tail -5 "$log"
  fi
done

echo "mutants: $rows rows, $caught caught"
if [ ${#missed[@]} -gt 0 ]; then
  echo "NOT CAUGHT: ${missed[*]}"
  exit 1
fi
[ $rows -gt 0 ] || { echo "no rows run"; exit 1; }
