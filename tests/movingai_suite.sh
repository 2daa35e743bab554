#!/bin/sh
# Runs a test over every Moving AI scenario file in a data directory.
#
#   movingai_suite.sh NAME DATA MISSING SCRIPT ARG...
#
# SCRIPT is sh code run with ARG... followed by the DATA/scen/*.map.scen
# files as its positional parameters. When DATA has no maps/ or no scenario
# files the suite exits MISSING: 1 for the repository's own subset (it must be
# there), 77 for the optional full set (ctest's skip code), with the reason.
name=$1; data=$2; missing=$3; script=$4; shift 4
first=$(ls "$data"/scen/*.map.scen 2>/dev/null | head -n 1)
if [ -z "$first" ] || [ ! -d "$data/maps" ]; then
  echo "$name: no Moving AI maps/ and scen/*.map.scen under '$data'."
  if [ "$missing" -eq 77 ]; then
    echo "$name: skipped; the full set is optional (configure with -DPATHD_BENCH_DATA=DIR)."
  fi
  exit "$missing"
fi
count=$(ls "$data"/scen/*.map.scen | wc -l)
echo "$name: $count scenario files from $data"
exec sh -c "$script" "$name" "$@" "$data"/scen/*.map.scen
