#!/usr/bin/env bash
# Summarise scripts/cpu_busy.sh's samples: the busy share of every core together, averaged per
# minute since the run began ("min 3: 97%"), and over the whole run.
#   scripts/cpu_report.sh LOG
log="${1:?usage: scripts/cpu_report.sh LOG}"
[ -s "$log" ] || exit 0
awk '{ m = int($1 / 60); sum[m] += $2; n[m]++; all += $2; count++; if (m > last) last = m }
     END { line = "cpu busy per minute (all cores, %):";
           for (m = 0; m <= last; m++) if (n[m]) line = line sprintf(" %d:%d", m, sum[m] / n[m]);
           print line; printf "cpu busy over the run: %d%% of %d samples\n", all / count, count }' "$log"
