#!/usr/bin/env bash
# Headless Chromium screenshots of the built documentation site, to look at pages as a
# reader would: the landing page, a design page with diagrams, an API page, each at
# desktop (1280 px) and phone (390 px) widths. Needs Debian's chromium and a build:
#   python -m sphinx -W -n -b html docs docs/_build/html && bash scripts/screenshots.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/_build/screenshots}
mkdir -p "$out"
for page in index architecture api; do
    for width in 1280 390; do
        chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
            --window-size="$width,1600" \
            --screenshot="$out/$page-$width.png" \
            "file://$PWD/docs/_build/html/$page.html" >/dev/null 2>&1
        echo "$out/$page-$width.png"
    done
done
