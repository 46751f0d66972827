#!/usr/bin/env bash
# Generic mutation testing of reference/ with the conformance suite as the test.
#
# A periodic command, not a CI step (about 10-20 minutes on 2 cores). It never
# touches the working tree: mutmut works in a scratch copy laid out like the
# wheel (src/kvconform/{reference,conformance,vectors,spec}), so that mutmut's
# module names (from src/kvconform/reference/*.py) are the names the suite
# imports (kvconform_reference.*).
#
#   bash tests/mutation/run.sh                  # all of reference/
#   bash tests/mutation/run.sh hasher.py plan.py  # only these modules of reference/
#
# Environment: PYTHON (default python3) makes the tool venv; KVCONFORM_MUTATION_DIR
# (default /tmp/kvconform-mutation) is the scratch copy; MUTMUT_VENV (default
# /tmp/kvconform-mutmut-venv) is where mutmut is installed; MUTMUT_MAX_CHILDREN
# (default: the number of cores).
# Output: the score on the last line, survivors listed in $WORK/survivors.txt.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="${KVCONFORM_MUTATION_DIR:-/tmp/kvconform-mutation}"
VENV="${MUTMUT_VENV:-/tmp/kvconform-mutmut-venv}"
PYTHON="${PYTHON:-python3}"
MUTMUT_VERSION="3.8.1"

if [ ! -x "$VENV/bin/mutmut" ]; then
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "mutmut==$MUTMUT_VERSION" pytest numpy pyyaml jsonschema
fi

rm -rf "$WORK"
mkdir -p "$WORK/src" "$WORK/tests"
cp -r "$REPO/src/kvconform" "$WORK/src/kvconform"
for part in reference conformance vectors spec; do
    cp -r "$REPO/$part" "$WORK/src/kvconform/$part"
done
find "$WORK" -name __pycache__ -prune -exec rm -rf {} +
cp "$REPO/tests/mutation/test_suite_for_mutmut.py" "$WORK/tests/"

only=""
if [ "$#" -gt 0 ]; then
    for module in "$@"; do
        only="$only    src/kvconform/reference/$module"$'\n'
    done
else
    only="    src/kvconform/reference/*"$'\n'
fi
cat > "$WORK/setup.cfg" <<CFG
[mutmut]
source_paths = src
only_mutate =
$only
pytest_add_cli_args_test_selection = tests/test_suite_for_mutmut.py
pytest_add_cli_args = -p no:cacheprovider -q
CFG

cd "$WORK"
max_children="${MUTMUT_MAX_CHILDREN:-$(nproc)}"
"$VENV/bin/mutmut" run --max-children "$max_children" > "$WORK/mutmut-run.log" 2>&1 || true
"$VENV/bin/mutmut" results --all true > "$WORK/results.txt" 2>&1 || true
grep -v ": killed$" "$WORK/results.txt" > "$WORK/survivors.txt" || true
total=$(grep -c ": " "$WORK/results.txt" || true)
killed=$(grep -c ": killed$" "$WORK/results.txt" || true)
echo "survivors and other non-killed mutants: $WORK/survivors.txt ('mutmut show <name>' in $WORK)"
echo "mutmut score: $killed/$total killed"
