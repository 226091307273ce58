#!/usr/bin/env bash
# Regenerates export/glyph_table.inc, the plot's text as bitmaps
# (scripts/make_glyph_table.cpp says how). Needs libfreetype-dev and
# fonts-dejavu-core; the build does not: the table is committed, so the PNG
# is the same whichever FreeType or font a machine has.
# The sizes are the plot's: H / 60 pixels, 1.1x and 1.2x that, at H = 960.
set -euo pipefail
cd "$(dirname "$0")/.."
font=${FONT:-/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -std=c++20 -O1 -Wall -Wextra -Werror scripts/make_glyph_table.cpp -o "$tmp/make_glyph_table" \
  $(pkg-config --cflags --libs freetype2)
"$tmp/make_glyph_table" "$font" 16 17.6 19.2 > "$tmp/glyph_table.inc"
mv "$tmp/glyph_table.inc" export/glyph_table.inc
echo "wrote export/glyph_table.inc"
