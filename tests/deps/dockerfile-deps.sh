#!/usr/bin/env bash
# The Dockerfile's build stage installs what `make run` installs: the run set
# of scripts/install-deps.sh, plus make (which the README has a newcomer
# install by hand). The two lists are kept by hand in two places, so a build
# dependency added to one and not the other fails here, naming it.
#
#   dockerfile-deps.sh SOURCE_DIR
set -euo pipefail

top="$1"
want="$( { "$top/scripts/install-deps.sh" run --list; echo make; } | sort -u)"
# The package words of the build stage's apt-get install: from the line
# holding --no-install-recommends up to the one that ends the command (&&).
have="$(awk '
  /^FROM / { build = ($0 ~ / AS build$/) }
  build && /--no-install-recommends/ { inlist = 1; sub(/.*--no-install-recommends/, "") }
  inlist {
    for (i = 1; i <= NF; i++) {
      if ($i == "&&") { inlist = 0; break }
      if ($i != "\\") print $i
    }
  }' "$top/Dockerfile" | sort -u)"

if [ -z "$have" ]; then
  echo "dockerfile-deps: found no apt-get install in the Dockerfile's build stage" >&2
  exit 1
fi
missing="$(comm -23 <(echo "$want") <(echo "$have"))"
extra="$(comm -13 <(echo "$want") <(echo "$have"))"
[ -z "$missing" ] || echo "dockerfile-deps: the Dockerfile's build stage lacks:" $missing >&2
[ -z "$extra" ] || echo "dockerfile-deps: the Dockerfile's build stage installs what install-deps.sh run does not:" $extra >&2
[ -z "$missing" ] && [ -z "$extra" ] || exit 1
echo "dockerfile-deps: the build stage installs the run set and make ($(echo "$want" | wc -l) packages)"
