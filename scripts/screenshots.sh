#!/usr/bin/env bash
# Headless Chromium screenshots of the built documentation site, to look at pages as a
# reader would: by default the landing page, a design page with diagrams and an API
# page, each at desktop (1280 px) and phone (390 px) widths. Needs Debian's chromium
# and a build:
#   python -m sphinx -W -n -b html docs docs/_build/html && bash scripts/screenshots.sh [OUT]
# PAGES="wakeups endings" and HEIGHT=4000 (pixels of page captured) choose other pages
# and more of each.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/_build/screenshots}
pages=${PAGES:-index architecture api}
height=${HEIGHT:-1600}
mkdir -p "$out"
for page in $pages; do
    for width in 1280 390; do
        chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
            --window-size="$width,$height" \
            --screenshot="$out/$page-$width.png" \
            "file://$PWD/docs/_build/html/$page.html" >/dev/null 2>&1
        echo "$out/$page-$width.png"
    done
done
