#!/usr/bin/env bash
# The VM suite's time budget: reads run.sh's results (lines "PASS|FAIL NAME SECONDSs ...") and
# budget.tsv (each scenario's expected seconds), prints a table (scenario, expected, actual,
# ratio) and the total against VM_BUDGET_S, and fails, naming the scenario, when the suite went
# over its budget or a scenario took more than VM_SLOW_RATIO (default 2) times its expectation.
#   test-vm/budget.sh RESULTS_FILE [BUDGET_TSV]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
results=$1 tsv=${2:-$HERE/budget.tsv}
awk -v budget="${VM_BUDGET_S:-900}" -v slow="${VM_SLOW_RATIO:-2}" -F'\t' '
    FNR == NR { if ($0 !~ /^#/ && NF >= 2) want[$1] = $2; next }
    {
        split($0, f, " "); name = f[2]; secs = f[3]; sub(/s:?$/, "", secs)
        n++; names[n] = name; got[name] = secs + 0; verdict[name] = f[1]; total += secs
        boots[name] = (f[5] ~ /^boots/) ? f[4] : "?"
    }
    END {
        printf "%-18s %9s %9s %6s %5s  %s\n", "scenario", "expected", "actual", "ratio", "boots", "verdict"
        bad = 0
        for (i = 1; i <= n; i++) {
            s = names[i]; e = (s in want) ? want[s] : 0
            r = e > 0 ? got[s] / e : 0
            note = verdict[s]
            if (e == 0) { note = note ", no expectation in budget.tsv"; bad = 1; why = why " " s "(no expectation)" }
            else if (r > slow) { note = note ", SLOW: over " slow "x"; bad = 1; why = why " " s "(" sprintf("%.1f", r) "x)" }
            printf "%-18s %8ds %8.1fs %5.2fx %5s  %s\n", s, e, got[s], r, boots[s], note
        }
        printf "%-18s %8ds %8.1fs %5.2fx\n", "total", budget, total, total / budget
        if (total > budget) { bad = 1; why = why " the suite(" int(total) " s > " budget " s)" }
        if (bad) { printf "budget: FAIL:%s\n", why; exit 1 }
        print "budget: ok"
    }' "$tsv" "$results"
